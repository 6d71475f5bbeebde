"""The provisioning probe's groups on the push path the fio probes take.

One group per StorageClass (and node, for a class bound to nodes) under the job
`fioprobe_provision`: its totals are merged, saved in a state file before the push and read
back from the Pushgateway exactly as a fio probe's (`outcome.publish_group`, with one writer
per group, the writer lease and the Pushgateway replicas); only the names and what a run
adds differ (`fioprobe.metrics.provision`).
"""

from __future__ import annotations

from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import Transport
from fioprobe.metrics.provision import (
    PROVISION_SCHEMA,
    ProvisionOutcome,
    merge_result,
    registry_for_provision,
)
from fioprobe.publish.outcome import WRITER_LEASE_SECONDS, GroupKind, publish_group
from fioprobe.publish.statefile import StateDir, StateFile, file_name

#: The provisioning probe's kind of group.
PROVISIONING: GroupKind[ProvisionOutcome] = GroupKind(
    PROVISION_SCHEMA, merge_result, registry_for_provision
)
#: What a provisioning group's state file name starts with: never a fio probe's file, whose
#: names are the probe's key alone, in the same state directory.
STATE_PREFIX = "provision-"


def state_file(directory: StateDir, grouping_key: dict[str, str]) -> StateFile:
    """The group's state file in `directory`."""
    return directory.file(file_name(grouping_key, prefix=STATE_PREFIX))


def publish_provision(
    outcome: ProvisionOutcome,
    grouping_key: dict[str, str],
    transport: Transport | Shards,
    file: StateFile,
    *,
    lease_seconds: float = WRITER_LEASE_SECONDS,
) -> ProvisionOutcome:
    """Merge the run into its group's totals, save them, push them (see `publish_group`):
    PushError when nothing could be pushed (the run is kept for the next push), StateNotKept
    when the state could not be used (the run's failure to be counted was pushed)."""
    return publish_group(PROVISIONING, outcome, grouping_key, transport, file,
                         finished_at=outcome.finished_at,
                         lease_seconds=lease_seconds)  # fmt: skip
