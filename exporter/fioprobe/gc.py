"""`fioprobe gc`: delete Pushgateway groups of probes that are no longer configured.

The Pushgateway never forgets a group: when a StorageClass or a profile is removed from the
configuration, its last push stays there and Prometheus keeps scraping it forever, so
dashboards show a probe that no longer runs and `FioProbeStale` fires for it. This command
compares the gateway's `job="fioprobe"` groups with the configuration and deletes the rest.

Which groups are kept:
- a shared target's group `{storageclass, profile}` when the configuration has a target of
  that name (not node-local) with that profile;
- a node-local target's group `{storageclass, profile, node}` when the configuration has a
  node-local target of that name with that profile, *on any node*, unless `nodes` is given:
  then only on those nodes. The configuration does not list nodes (every node that runs
  the DaemonSet-like CronJob probes itself), so only the caller knows which nodes still
  exist, e.g. from `kubectl get nodes -l node-role.kubernetes.io/control-plane`.
- a `job="fioprobe"` group whose labels are not a fioprobe grouping key (other or missing
  labels) is never touched: it was not pushed by fioprobe, and deleting what we do not
  understand is worse than leaving it. It is reported as foreign.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from .config import Config
from .pushgateway import JOB, Transport, delete_group, list_groups

_SHARED_KEY = frozenset({"job", "storageclass", "profile"})
_NODE_KEY = _SHARED_KEY | {"node"}


@dataclass(slots=True)
class GcResult:
    """What gc found; `deleted` holds what was deleted (or would be, in a dry run)."""

    kept: list[dict[str, str]] = field(default_factory=list)
    deleted: list[dict[str, str]] = field(default_factory=list)
    foreign: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False


def transport_for(config: Config) -> Transport:
    """The Pushgateway of a configuration, with its credentials and TLS settings."""
    return Transport.from_config(config.pushgateway)


def configured(config: Config) -> set[tuple[str, str, bool]]:
    """(storageclass, profile, node_local) of every configured probe."""
    return {
        (target.name, profile.name, target.node_local)
        for target in config.targets
        for profile in target.profiles
    }


def is_wanted(
    labels: dict[str, str],
    probes: set[tuple[str, str, bool]],
    nodes: Collection[str] | None,
) -> bool:
    """Whether a fioprobe group (its grouping-key labels) belongs to a configured probe."""
    node = labels.get("node")
    if (labels["storageclass"], labels["profile"], node is not None) not in probes:
        return False
    return node is None or nodes is None or node in nodes


def grouping_key(labels: dict[str, str]) -> dict[str, str]:
    """The labels after `job`, in the order fioprobe pushes them."""
    return {name: labels[name] for name in ("storageclass", "profile", "node") if name in labels}


def collect(
    transport: Transport,
    config: Config,
    *,
    nodes: Collection[str] | None = None,
    dry_run: bool = False,
) -> GcResult:
    """Delete (or, with `dry_run`, only list) the groups no configured probe pushes."""
    probes = configured(config)
    result = GcResult(dry_run=dry_run)
    for group in list_groups(transport):
        labels = group.get("labels")
        if not isinstance(labels, dict) or labels.get("job") != JOB:
            continue
        labels = {str(k): str(v) for k, v in labels.items()}
        if set(labels) not in (_SHARED_KEY, _NODE_KEY) or not all(labels.values()):
            result.foreign.append(labels)
        elif is_wanted(labels, probes, nodes):
            result.kept.append(grouping_key(labels))
        else:
            result.deleted.append(grouping_key(labels))
    if not dry_run:
        for key in result.deleted:
            delete_group(transport, key)
    return result
