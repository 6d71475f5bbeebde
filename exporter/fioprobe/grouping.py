"""The Pushgateway grouping key: the labels that name one probe's group.

Every probe pushes to /metrics/job/fioprobe/storageclass/<name>/profile/<profile>, plus
/node/<node> when it probes a node-local disk; the provisioning probe pushes to
/metrics/job/fioprobe_provision/storageclass/<name>, plus /node/<node> for a class bound to
nodes. The probe, the backfill, gc, the demo and the
command line build or read that key; the mixin's rules aggregate by the same labels
(lib/util.libsonnet's groupingLabels, held equal to PROBE_LABELS by
tests/repo/test_single_home.py). Foundation: imports nothing of fioprobe.
"""

from __future__ import annotations

#: The `job` label of every fio probe's group.
JOB = "fioprobe"
#: The `job` label of the provisioning probe's groups (`fioprobe provision`): a job of their
#: own, so that no key of theirs is ever a fio probe's and `fioprobe gc`, which reads only
#: `job="fioprobe"`, never takes one for a probe that is no longer configured.
PROVISION_JOB = "fioprobe_provision"

STORAGECLASS = "storageclass"
PROFILE = "profile"
#: Only node-local probes have it: a StorageClass probe's volume is the same on every node.
NODE = "node"
#: The labels after `job`, in the order fioprobe pushes them: the push URL and the name of
#: the group's state file follow this order.
PROBE_LABELS: tuple[str, str, str] = (STORAGECLASS, PROFILE, NODE)

#: What a refused writer's conflict group adds to its probe's key (publish/outcome.py).
WRITER = "writer"
#: A distributed benchmark's group is `benchmark` and `storageclass`, no `profile`: the
#: mixin's probe selectors require benchmark="" so that they never take one for a probe.
BENCHMARK = "benchmark"


def probe_key(storageclass: str, profile: str, node: str | None = None) -> dict[str, str]:
    """A probe's grouping key after `job`, in push order; `node` only when it is set."""
    key = {STORAGECLASS: storageclass, PROFILE: profile}
    if node:
        key[NODE] = node
    return key


def provision_key(storageclass: str, node: str | None = None) -> dict[str, str]:
    """A provisioning probe's grouping key after `job` (`PROVISION_JOB`), in push order:
    its StorageClass, and the node for a class bound to nodes."""
    key = {STORAGECLASS: storageclass}
    if node:
        key[NODE] = node
    return key


def benchmark_key(benchmark: str, storageclass: str) -> dict[str, str]:
    """A distributed benchmark's grouping key after `job`, in push order."""
    return {BENCHMARK: benchmark, STORAGECLASS: storageclass}
