"""`fioprobe gc`: delete Pushgateway groups of probes that are no longer configured.

The Pushgateway never forgets a group: when a StorageClass or a profile is removed from the
configuration, its last push stays there and Prometheus keeps scraping it forever, so
dashboards show a probe that no longer runs and `FioProbeStale` fires for it. This command
compares the gateway's `job="fioprobe"` groups with the configurations it is given and
deletes what they no longer have.

Several configurations often share one Pushgateway (the shipped manifests have one per
StorageClass CronJob), and each knows only its own targets. So a group says whose it is:
every push of `fioprobe run` carries `fioprobe_owner_info{owner}`, the configuration's
`owner` (default "default"). gc deletes a group only when its owner is the owner of one of
the configurations it was given; groups of other owners are never touched, whatever their
labels. Which groups go (docs/GC.md has the whole story):
- a probe's group `{storageclass, profile[, node]}` of a given owner that no given
  configuration has (a node-local one: of that name and profile on any node, unless `nodes`
  lists the nodes that still exist);
- a writer conflict group (the probe's key plus `writer`, pushed when a second writer was
  refused; see publish/outcome.py) of a given owner (its own, or else its probe group's) once its
  last push is older than the writer lease: a refused writer that still runs pushes it again
  at every run, so an older one is a writer that stopped or took the group over; or at once,
  when its probe is no longer configured;
- a group without an owner (pushed before owners existed, or by `push`/`probe` without
  `--owner`) only with `unowned=True`, under the rules above: a probe that still runs gets
  its owner at its next push, so only groups of probes removed before then stay unowned;
- a `job="fioprobe"` group whose labels are not a fioprobe grouping key is never touched.

The provisioning probe's groups (`job="fioprobe_provision"`, `{storageclass[, node]}`, see
fioprobe.metrics.provision) carry the same owner, writer and push ids, and go by the same
rules: a group of a given owner whose StorageClass no given configuration lists under
`provision.storage_classes` is one no probe pushes any more (a configuration without
`provision:` lists none, so every provisioning group of its owner goes); a node-bound one
matches on any node unless `nodes` lists the nodes that still exist; its writer conflict
groups, unowned groups and copies on other replicas as above. Its copies are ordered by its
own counters (runs, failures, objects removed), not the fio probes'.

With several Pushgateway replicas (`fioprobe.gateway.shards`) gc reads every replica and deletes a
group where it is. A group held by two replicas has a copy its probe no longer pushes: the
old copy of a group that moved (its probe pushed to the new replica and could not delete the
old copy). Which one is old is read from the copies, never from gc's own replica list: the
probes may use another list than gc (a rollout or a rollback of the replicas), and gc's
"own" replica may then hold the stale copy while the live one is elsewhere. A copy is old,
and deleted, only when another copy is newer (pushed later, or continued from it: its
`fioprobe_push_basis_id` is this copy's push id) and not behind it (every cumulative count
at least as high): deleting it loses no run. Copies that cannot be ordered so (pushed by two
writers that diverged, or unreadable counts) are all kept and listed. A group found only on
a replica that is not its own is kept: it moves at its probe's next run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from fioprobe.errors import UsageError
from fioprobe.gateway.api import delete_group, list_groups
from fioprobe.gateway.readback import COUNTERS, PUSH_IDS, PUSH_TIME
from fioprobe.gateway.shards import Shards, identity
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import (
    JOB,
    NODE,
    PROBE_LABELS,
    PROFILE,
    PROVISION_JOB,
    STORAGECLASS,
    WRITER,
)
from fioprobe.metrics.provision import PROVISION_SCHEMA
from fioprobe.metrics.totals import COUNT_LIMIT
from fioprobe.target.config import Config

OWNER_INFO = "fioprobe_owner_info"
_SHARED_KEY = frozenset({"job", STORAGECLASS, PROFILE})
_NODE_KEY = _SHARED_KEY | {NODE}
_CONFLICT_KEYS = (_SHARED_KEY | {WRITER}, _NODE_KEY | {WRITER})
#: A provisioning group's key: its class, and the node for a class bound to nodes.
_PROVISION_KEY = frozenset({"job", STORAGECLASS})
_PROVISION_NODE_KEY = _PROVISION_KEY | {NODE}
#: The label names of each job's groups (writer conflict groups included).
_KEYS: dict[str, tuple[frozenset[str], ...]] = {
    JOB: (_SHARED_KEY, _NODE_KEY, *_CONFLICT_KEYS),
    PROVISION_JOB: (_PROVISION_KEY, _PROVISION_NODE_KEY, _PROVISION_KEY | {WRITER},
                    _PROVISION_NODE_KEY | {WRITER}),
}  # fmt: skip
#: The cumulative counters that order two copies of a group, by job.
_COUNTERS: dict[str, tuple[str, ...]] = {
    JOB: COUNTERS,
    PROVISION_JOB: tuple(name for _, name in PROVISION_SCHEMA.counters),
}


@dataclass(slots=True)
class GcResult:
    """What gc found; `deleted` holds what was deleted (or would be, in a dry run).

    Each group is listed by its grouping key after `job` (`shown_key`): a fio probe's as it
    is, a provisioning group's with its job first, so that the two are never confused.
    """

    kept: list[dict[str, str]] = field(default_factory=list)
    deleted: list[dict[str, str]] = field(default_factory=list)
    foreign: list[dict[str, str]] = field(default_factory=list)
    #: (grouping key, owner) of groups another configuration owns: never touched.
    others: list[tuple[dict[str, str], str]] = field(default_factory=list)
    #: Groups without an owner, left alone (deleted only with `unowned`).
    unowned: list[dict[str, str]] = field(default_factory=list)
    #: Old copies of moved groups: another replica holds the group newer and not behind.
    #: Deleted (or listed, in a dry run) with their replica's URL.
    misplaced: list[tuple[dict[str, str], str]] = field(default_factory=list)
    #: Groups held by several replicas whose copies cannot be ordered (two writers diverged,
    #: or counts that cannot be read): every copy kept, with the replicas' URLs.
    unordered: list[tuple[dict[str, str], list[str]]] = field(default_factory=list)
    dry_run: bool = False


def transport_for(configs: Sequence[Config]) -> Shards:
    """The one Pushgateway (all its replicas) of the configurations, with its credentials
    and TLS settings."""
    replicas = {frozenset(identity(url) for url in config.pushgateway.urls) for config in configs}
    if len(replicas) != 1:
        raise UsageError(
            "the configurations name different Pushgateways (or different replicas of one); "
            "give gc the configurations of one Pushgateway at a time"
        )
    return Shards.from_config(configs[0].pushgateway)


def configured(configs: Sequence[Config]) -> set[tuple[str, str, bool]]:
    """(storageclass, profile, node_local) of every probe of every configuration."""
    return {
        (target.name, profile.name, target.node_local)
        for config in configs
        for target in config.targets
        for profile in target.profiles
    }


def provisioned(configs: Sequence[Config]) -> set[str]:
    """The StorageClasses the configurations' provisioning probes provision."""
    return {name for config in configs for name in config.provisioned}


def is_wanted(
    labels: dict[str, str],
    probes: set[tuple[str, str, bool]],
    nodes: Collection[str] | None,
    classes: Collection[str] = (),
) -> bool:
    """Whether a fioprobe group (its grouping-key labels) belongs to a configured probe: a
    fio probe of `probes`, or, for a provisioning group, a class of `classes`."""
    node = labels.get(NODE)
    if labels["job"] == PROVISION_JOB:
        if labels[STORAGECLASS] not in classes:
            return False
    elif (labels[STORAGECLASS], labels[PROFILE], node is not None) not in probes:
        return False
    return node is None or nodes is None or node in nodes


def grouping_key(labels: dict[str, str]) -> dict[str, str]:
    """The labels after `job`, in the order fioprobe pushes them."""
    return {name: labels[name] for name in (*PROBE_LABELS, WRITER) if name in labels}


def shown_key(labels: dict[str, str]) -> dict[str, str]:
    """The grouping key as gc lists it: a fio probe's after `job`; any other job's (a
    provisioning group, whose key alone could be read as a probe's) with its job first."""
    key = grouping_key(labels)
    return key if labels["job"] == JOB else {"job": labels["job"], **key}


def collect(
    transport: Transport | Shards,
    configs: Sequence[Config],
    *,
    nodes: Collection[str] | None = None,
    dry_run: bool = False,
    unowned: bool = False,
    now: float | None = None,
) -> GcResult:
    """Delete (or, with `dry_run`, only list) the groups of the configurations' owners that
    no configured probe pushes any more, and their stale writer conflict groups."""
    now = time.time() if now is None else now
    owners = {config.owner for config in configs}
    probes = configured(configs)
    classes = provisioned(configs)
    lease = max(config.pushgateway.writer_lease_seconds for config in configs)
    shards = Shards.of(transport)
    # Every replica is read before anything is deleted: which copy of a group is the old
    # one is known only from all of them.
    groups: list[tuple[dict[str, str], dict[str, object], Transport]] = []
    for replica in shards:
        for group in list_groups(replica):
            labels = group.get("labels")
            if isinstance(labels, dict) and labels.get("job") in _KEYS:
                groups.append(({str(k): str(v) for k, v in labels.items()}, group, replica))
    owner_of = {frozenset(labels.items()): _owner(group) for labels, group, _ in groups}
    copies: dict[frozenset[tuple[str, str]], list[tuple[Transport, Copy]]] = {}
    for labels, group, replica in groups:
        copy = Copy.of(group, _COUNTERS[labels["job"]])
        copies.setdefault(frozenset(labels.items()), []).append((replica, copy))
    result = GcResult(dry_run=dry_run)
    listed_unordered: set[frozenset[tuple[str, str]]] = set()
    deletions: list[tuple[Transport, dict[str, str], str]] = []
    for labels, group, replica in groups:
        names = set(labels)
        job = labels["job"]
        if names not in _KEYS[job] or not all(labels.values()):
            result.foreign.append(labels)
            continue
        key = shown_key(labels)
        owner = _owner(group)
        conflict = WRITER in labels
        if conflict and owner is None:  # a refused writer without an owner: its probe's
            probe_labels = {k: v for k, v in labels.items() if k != WRITER}
            owner = owner_of.get(frozenset(probe_labels.items()))
        if owner is None and not unowned:
            result.unowned.append(key)
            continue
        if owner is not None and owner not in owners:
            result.others.append((key, owner))
            continue
        held = copies[frozenset(labels.items())]
        old, live = _old_and_live(held)
        if any(replica is where for where in old):
            result.misplaced.append((key, replica.url))
            deletions.append((replica, grouping_key(labels), job))
            continue
        if len(held) > 1 and len(live) != 1 and frozenset(labels.items()) not in listed_unordered:
            listed_unordered.add(frozenset(labels.items()))
            kept = [where.url for where, _ in held if all(where is not w for w in old)]
            result.unordered.append((key, kept))
        wanted = is_wanted(labels, probes, nodes, classes)
        if conflict and wanted:
            pushed = _push_time(group)
            wanted = pushed is not None and now - pushed <= lease
        (result.kept if wanted else result.deleted).append(key)
        if not wanted:
            deletions.append((replica, grouping_key(labels), job))
    if not dry_run:
        for replica, key, job in deletions:
            delete_group(replica, key, job=job)
    return result


def _old_and_live(
    held: list[tuple[Transport, Copy]],
) -> tuple[list[Transport], list[Transport]]:
    """The replicas of a group's old copies, and of its live ones (superseded by no copy).

    Only a copy that a live copy supersedes is old: were the copies' clocks and push links
    ever to contradict each other in a cycle, no copy would be live and none is deleted.
    """
    superseded = [
        (where, copy)
        for where, copy in held
        if any(copy.superseded_by(other) for there, other in held if there is not where)
    ]
    live = [(where, copy) for where, copy in held if all(where is not w for w, _ in superseded)]
    old = [
        where for where, copy in superseded if any(copy.superseded_by(other) for _, other in live)
    ]
    return old, [where for where, _ in live]


@dataclass(frozen=True, slots=True)
class Copy:
    """What orders two copies of one group on two replicas: when each was pushed (the
    gateway's clock), which push it is, which push it continued from, and its counts."""

    push_time: float | None
    push_id: int | None
    basis_id: int | None
    #: The cumulative counters (its job's, in order); None when one cannot be read as a count.
    counts: tuple[int, ...] | None

    @classmethod
    def of(cls, group: dict[str, object], counters: tuple[str, ...] = COUNTERS) -> Copy:
        """The copy `group`, its counts read from `counters` (its job's cumulative ones)."""
        # 0 is no push (a first push names basis 0): never a link between two copies.
        push_id, basis_id = (_whole(group, name) or None for name in PUSH_IDS)
        counts = tuple(_whole(group, name, absent=0) for name in counters)
        known = tuple(count for count in counts if count is not None)
        return cls(
            _push_time(group), push_id, basis_id, known if len(known) == len(counts) else None
        )

    def superseded_by(self, other: Copy) -> bool:
        """Whether `other` holds everything this copy does and came after it: `other` was
        pushed later (by the gateways' clocks) or continued from this very push, and none of
        this copy's counts is higher. Deleting this copy then loses no run."""
        if self.counts is None or other.counts is None:
            return False
        if any(mine > theirs for mine, theirs in zip(self.counts, other.counts, strict=True)):
            return False
        if self.push_id is not None and other.basis_id == self.push_id:
            return True  # `other` read this push and continued from it, whatever the clocks
        if other.push_id is not None and self.basis_id == other.push_id:
            return False  # the other way round
        return (
            self.push_time is not None
            and other.push_time is not None
            and self.push_time < other.push_time
        )


def _whole(group: dict[str, object], name: str, absent: int | None = None) -> int | None:
    """The value of the single series `name` as a count below 2**53; `absent` when the group
    has no such family, None when it cannot be read as one."""
    if name not in group:
        return absent
    series = _series(group, name)
    try:
        value = float(str(series.get("value"))) if series is not None else math.nan
    except ValueError:
        return None
    if not (math.isfinite(value) and value.is_integer() and 0 <= value < COUNT_LIMIT):
        return None
    return int(value)


def _series(group: dict[str, object], name: str) -> dict[str, object] | None:
    """The single series of family `name` in a group, None when absent or not single."""
    family = group.get(name)
    metrics = family.get("metrics") if isinstance(family, dict) else None
    if not isinstance(metrics, list) or len(metrics) != 1 or not isinstance(metrics[0], dict):
        return None
    return metrics[0]


def _owner(group: dict[str, object]) -> str | None:
    series = _series(group, OWNER_INFO)
    labels = series.get("labels") if series is not None else None
    owner = labels.get("owner") if isinstance(labels, dict) else None
    return owner if isinstance(owner, str) and owner else None


def _push_time(group: dict[str, object]) -> float | None:
    """The group's last push (the gateway's clock); None if it cannot be read."""
    series = _series(group, PUSH_TIME)
    try:
        value = float(str(series.get("value"))) if series is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None
