"""A real kube-apiserver made ready for the provisioning probe (`support.kubeapi`): its
namespace under the restricted Pod Security standard, its service account allowed exactly
what docs/PROVISIONING.md lists (and a token for it), and StorageClasses whose provisioner
does not exist (this server runs no controllers: nothing is ever provisioned).

Shared by the runner's tests and the command's: `prepare` once per module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fioprobe.kube.client import KubeClient
from fioprobe.provision.workload import RunSpec

from support import kubeapi, services

NAMESPACE = "fioprobe-provision"
ACCOUNT = "fioprobe-provision"
OWNER = "fioprobe-provision-test"
CLAIMS = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
#: What the probe's service account may do: only in its namespace, claims and pods and the
#: events; cluster-wide, read the storage objects.
NAMESPACED = [
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "pods"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
]  # fmt: skip
CLUSTER = [
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "volumeattachments"],
     "verbs": ["get", "list", "watch"]},
]  # fmt: skip
#: The classes `prepare` makes: (name, volumeBindingMode, reclaimPolicy).
CLASSES = (
    ("nowhere-immediate", "Immediate", "Delete"),
    ("nowhere-wait", "WaitForFirstConsumer", "Delete"),
    ("kept", "Immediate", "Retain"),
)


def storage_class(name: str, mode: str, reclaim: str = "Delete") -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": "example.com/does-not-exist",
            "volumeBindingMode": mode, "reclaimPolicy": reclaim}  # fmt: skip


@dataclass
class Cluster:
    kube: kubeapi.Kube
    token_file: Path

    def client(self) -> KubeClient:
        return KubeClient(self.kube.url, self.token_file, self.kube.ca_file)

    def spec(self, storage_class: str, node: str | None = None) -> RunSpec:
        return RunSpec(owner=OWNER, storage_class=storage_class, namespace=NAMESPACE,
                       size="1Gi", image="fioprobe:test", node=node)  # fmt: skip

    def kube_options(self) -> list[str]:
        """The command's options that reach this server as the probe's service account."""
        return ["--kube-server", self.kube.url, "--kube-token-file", str(self.token_file),
                "--kube-ca-file", str(self.kube.ca_file)]  # fmt: skip

    def names(self, resource: str) -> set[str]:
        got = self.kube.kubectl("get", resource, "-n", NAMESPACE, "-o", "json")
        assert got.returncode == 0, got.stderr
        return {
            item["metadata"]["name"] for item in json.loads(got.stdout)["items"]
            if not item["metadata"].get("deletionTimestamp")
        }  # fmt: skip


def prepare(kube: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """The namespace, the service account and its RBAC, the classes; waits (at most a
    minute) until the authorizer applies the bindings."""
    restricted = {f"pod-security.kubernetes.io/{mode}": "restricted"
                  for mode in ("enforce", "audit", "warn")}  # fmt: skip
    kube.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": NAMESPACE, "labels": restricted}},
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}},
            # What the controller-manager makes in every namespace (this server runs none):
            # the test pods run as it, with no token mounted.
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": "default", "namespace": NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}, "rules": NAMESPACED},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": ACCOUNT, "namespace": NAMESPACE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": ACCOUNT},
             "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": ACCOUNT}, "rules": CLUSTER},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": ACCOUNT},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": ACCOUNT},
             "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]},
            *(storage_class(*row) for row in CLASSES),
        ]
    )  # fmt: skip
    token_file = kube.token_file(ACCOUNT, NAMESPACE, tmp_path_factory.mktemp("serviceaccount"))

    def granted() -> bool:  # the authorizer learns the bindings from a watch: a moment
        can = kube.kubectl("auth", "can-i", "watch", "volumeattachments.storage.k8s.io",
                           f"--as=system:serviceaccount:{NAMESPACE}:{ACCOUNT}")  # fmt: skip
        return can.stdout.strip() == "yes"

    services.wait_for(granted, timeout=60, what="the bindings to take effect")
    return Cluster(kube, token_file)


#: One `kubectl auth can-i` question: verb, resource (`pods/exec`: a subresource), namespace
#: (None: cluster-wide).
Question = tuple[str, str, "str | None"]


def rbac_questions(
    test_namespace: str, probe_namespace: str
) -> tuple[list[Question], list[Question]]:
    """What the probe's account must be allowed (exactly NAMESPACED in the test namespace and
    CLUSTER), and a list it must be denied: the same verbs in its own namespace and in
    `default`, Secrets, Nodes, and every write beside its own."""
    allowed: list[Question] = [
        (verb, resource, test_namespace)
        for resource in ("persistentvolumeclaims", "pods")
        for verb in ("create", "get", "list", "watch", "delete")
    ]
    allowed += [(verb, "events", test_namespace) for verb in ("list", "watch")]
    allowed += [
        (verb, resource, None)
        for resource in ("persistentvolumes", "storageclasses.storage.k8s.io",
                         "volumeattachments.storage.k8s.io")
        for verb in ("get", "list", "watch")
    ]  # fmt: skip
    denied: list[Question] = [
        (verb, resource, namespace)
        for namespace in (probe_namespace, "default")
        for resource in ("persistentvolumeclaims", "pods")
        for verb in ("create", "get", "list", "watch", "delete")
    ]
    denied += [
        ("get", "secrets", test_namespace),
        ("list", "secrets", test_namespace),
        ("get", "secrets", probe_namespace),
        ("get", "nodes", None),
        ("list", "nodes", None),
        ("update", "persistentvolumeclaims", test_namespace),
        ("patch", "pods", test_namespace),
        ("create", "pods/exec", test_namespace),
        ("get", "pods/log", test_namespace),
        ("create", "events", test_namespace),
        ("delete", "persistentvolumes", None),
        ("create", "storageclasses.storage.k8s.io", None),
        ("delete", "volumeattachments.storage.k8s.io", None),
    ]
    return allowed, denied


def can_i_args(verb: str, resource: str, namespace: str | None) -> list[str]:
    """`kubectl auth can-i`'s arguments: `pods/exec` would be read as the pod named exec, so a
    subresource is an option of its own."""
    resource, _, subresource = resource.partition("/")
    where = ["-n", namespace] if namespace else []
    where += [f"--subresource={subresource}"] if subresource else []
    return ["auth", "can-i", verb, resource, *where]
