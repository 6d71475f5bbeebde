"""Nodes by label, and the names the API gives nodes and labels.

The etcd members of a cluster are the nodes that carry the control-plane role label:
node-role.kubernetes.io/control-plane, or node-role.kubernetes.io/master on older clusters
and OpenShift. A cluster in between carries either, or both; so the members are the union
of one list per label key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import KubeConfigError

#: The role labels of control-plane nodes: today's, and the one before it (still OpenShift's).
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

#: A DNS subdomain (RFC 1123), what a node's name is: at most 253 characters.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: The name part of a label key: at most 63 characters.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def node_name_problem(name: str) -> str | None:
    """Why `name` cannot be a node's name, or None when it can."""
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        return (
            "must be a node name: lower-case letters, digits, '-' and '.', starting and "
            "ending with a letter or digit, at most 253 characters"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why `key` cannot be a label key ([prefix/]name), or None when it can.

    Checked before it goes into a labelSelector: a key is the whole selector (nodes that
    carry it, whatever its value), so ',' '=' '!' or spaces must not make it another one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        return "must be a label key: its prefix before '/' must be a DNS subdomain"
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return (
            "must be a label key ([prefix/]name): the name at most 63 letters, digits, '-', "
            "'_' and '.', starting and ending with a letter or digit"
        )
    return None


def nodes_with_any_label(client: KubeClient, labels: Sequence[str]) -> list[str]:
    """The names of the nodes that carry any of the label keys `labels`, sorted.

    One list per key (labelSelector=<key>: the key is there, whatever its value), the union
    by name: a node with both role labels is one member. Needs get/list on nodes, nothing
    else. Raises the KubeError of the first list that fails: a union with a list missing
    would be a wrong member set, not a smaller one."""
    names: set[str] = set()
    for label in labels:
        problem = label_key_problem(label)
        if problem is not None:
            raise KubeConfigError(f"label {label!r:.80} {problem}")
        names.update(
            client.list_names(
                "/api/v1/nodes", what=f"listing the nodes labelled {label}", label_selector=label
            )
        )
    return sorted(names)
