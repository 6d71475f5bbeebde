"""Merge one outcome into its group's totals, save them, push them: the one path every
command (push, probe, run) takes, so that "no probe result is ever lost, no counter ever goes
backwards" holds everywhere.

Order matters: totals are saved *before* the push, and the push happens under the state's
lock. If the push fails, the state file already holds this run, and the next successful push
carries it. Totals that could not be saved are never pushed: a later run would start from
the older file and push less than the gateway holds (a false counter reset). Such a run is
still reported: its failure (`fioprobe_success 0` and the reason) is POSTed into the group,
which leaves the group's counters as they are.

One writer owns a group's counters (see `state.GroupState`). A writer pushes its own totals
without looking at the Pushgateway while its last successful push is recent (within the
writer lease); otherwise it reads the group back first (one GET of every group, which is why
it is not done on every push):
- no group there (a new probe; a Pushgateway restarted without persistence): this writer's
  totals, or its pending runs alone, go on;
- the group is this writer's (or from before writers had identities): its own totals go on;
- another writer pushed it less than a lease ago: this run is refused (`writer_conflict`),
  kept as pending, and the refusal is pushed into a group of its own (the grouping key plus
  `writer`), which FioProbeFailing reports; the owner's counters are not touched;
- another writer, silent for longer than the lease: this writer takes the group over,
  continuing from its totals plus its own pending runs.
When the group cannot be read at all, the run is kept as pending and nothing is pushed.

With several Pushgateway replicas (`fioprobe.shards`) the group is pushed to its replica.
When the replicas changed since this state's last push, the group moves: it is read back
from the replica that held it (when a read-back is due), pushed to its new replica, and only
then deleted from the old one. A delete that fails is retried at the next run (the state
keeps naming the old replica until it succeeds); `fioprobe gc` removes such a copy too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import pushgateway, state
from .collector import ProbeOutcome, registry_for
from .errors import FailureReason
from .pushgateway import PushError, ReadBack, Transport
from .shards import Shards
from .state import GroupState, GroupTotals
from .statefile import StateDir, StateError, StateFile, file_name

ENV_STATE_DIR = "FIOPROBE_STATE_DIR"
#: How long a writer's pushes make the group its own: past this, another writer may take it
#: over, and the writer itself reads the group back before pushing again. Longer than any
#: sensible probe interval; shorter than the time anyone waits for a replaced pod's probe.
WRITER_LEASE_SECONDS = 3600.0

#: A hook run inside the state lock after the merge: it may update model state kept beside
#: the totals (the gp2 credit balance) and returns the outcome to push.
Adjust = Callable[[ProbeOutcome, GroupTotals], ProbeOutcome]


class StateNotKept(StateError):
    """The state could not be used; the run's counts were not pushed, its failure was
    (unless `pushed` is False: the Pushgateway refused that too)."""

    def __init__(self, message: str, reason: FailureReason, *, pushed: bool) -> None:
        super().__init__(message, reason)
        self.pushed = pushed


def default_state_file(grouping_key: dict[str, str]) -> StateFile:
    """Per-group state file under $FIOPROBE_STATE_DIR (default ~/.local/state/fioprobe)."""
    base = os.environ.get(ENV_STATE_DIR) or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "fioprobe"
    )
    return StateDir(Path(base), create_parents=True).file(file_name(grouping_key))


def publish(
    outcome: ProbeOutcome,
    grouping_key: dict[str, str],
    transport: Transport | Shards,
    state_file: StateFile,
    *,
    finished_at: float | None = None,
    adjust: Adjust | None = None,
    lease_seconds: float = WRITER_LEASE_SECONDS,
) -> ProbeOutcome:
    """Merge, save, push; returns the outcome that was pushed.

    Raises PushError when nothing could be pushed (the run is saved and goes with the next
    push), and StateNotKept when the state could not be used (the failure was pushed).
    """
    finished_at = time.time() if finished_at is None else finished_at
    shards = Shards.of(transport)
    replica = shards.for_key(grouping_key)
    try:
        with state_file.locked():
            return _publish_locked(
                outcome, grouping_key, shards, state_file, finished_at, adjust, lease_seconds
            )
    except StateError as exc:
        if isinstance(exc, StateNotKept | WriterConflict):
            raise
        # A run that failed already keeps its own reason (a missing directory also has no
        # state directory; the cause to report is the directory).
        reason = exc.reason if outcome.success else outcome.failure_reason or exc.reason
        try:
            push_failure(replica, grouping_key, outcome.failed(reason))
        except PushError as push_exc:
            raise StateNotKept(
                f"{exc}; the failure ({reason}) could not be pushed either: {push_exc}",
                reason,
                pushed=False,
            ) from None
        raise StateNotKept(
            f"{exc}; the failure ({reason}) was pushed, this run's counts were not",
            reason,
            pushed=True,
        ) from None


def _publish_locked(
    outcome: ProbeOutcome,
    key: dict[str, str],
    shards: Shards,
    file: StateFile,
    finished_at: float,
    adjust: Adjust | None,
    lease_seconds: float,
) -> ProbeOutcome:
    loaded = state.load(file)
    group = loaded or GroupState()
    transport = shards.for_key(key)
    # Replicas that may still hold a copy of this group from before the replicas changed.
    moved_from = _previous_replicas(shards, transport, group)
    now = time.time()
    recent = group.last_push_at is not None and 0 <= now - group.last_push_at <= lease_seconds
    took_over = False
    if not (group.claimed and group.totals is not None and recent):
        try:
            back = pushgateway.read_group(transport, key)
            # Not on its replica: it may not have moved yet (read it where it was).
            for previous in moved_from if back is None else ():
                back = pushgateway.read_group(previous, key)
                if back is not None:
                    break
        except PushError:
            # Who owns the group is unknown: keep the run for later, push nothing.
            state.merge_run(group.pending, outcome.run, success=outcome.success,
                            finished_at=finished_at)  # fmt: skip
            state.save(file, group)
            raise
        for note in back.dropped if back is not None else ():
            print(f"fioprobe: read back of {key}: {note}", file=sys.stderr)
        owner = None if back is None else back.writer
        if back is not None and owner not in (None, group.writer):
            if back.push_time is None or now - back.push_time < lease_seconds:
                return _refuse(outcome, key, transport, file, group, finished_at, owner)
            took_over = True
        group.totals = state.combine(_base(group, back, took_over), group.pending)
        group.pending = GroupTotals()
        # A state claims the group only once it has outlived a run: a state that is new at
        # every run (a container without a volume) is no owner, just a reader-writer.
        group.claimed = loaded is not None
    assert group.totals is not None
    state.merge_run(group.totals, outcome.run, success=outcome.success, finished_at=finished_at)
    if adjust is not None:
        outcome = adjust(outcome, group.totals)
    state.save(file, group)
    writer = group.writer if group.claimed else None
    pushgateway.push(transport, key, registry_for(outcome, group.totals, writer=writer))
    group.last_push_at = time.time()
    # Only after the push: until the new replica holds the group, the old copy is the one
    # that counts. A failed delete keeps the old replica in the state: the next run retries.
    moved = all([_delete_quietly(previous, key) for previous in moved_from])
    if moved:
        group.shard = transport.url
    # If this save fails, only the lease clock is lost: the next run reads the group back.
    with contextlib.suppress(StateError):
        state.save(file, group)
    if took_over:
        _delete_quietly(transport, {**key, "writer": group.writer})
    return outcome


def _previous_replicas(
    shards: Shards, transport: Transport, group: GroupState
) -> tuple[Transport, ...]:
    """The replicas other than `transport` that may hold this group.

    The state names the replica of its last push: that one, if it is still listed (a replica
    that was removed is gone with its groups). A state that names none (new, or from before
    sharding) may have pushed to any other replica: all of them, until one push succeeds.
    """
    if len(shards) == 1:
        return ()
    if group.shard is not None:
        previous = shards.by_url(group.shard)
        return () if previous is None or previous is transport else (previous,)
    return shards.others(transport)


def _base(group: GroupState, back: ReadBack | None, took_over: bool) -> GroupTotals:
    """The totals this push continues from (pending runs are added to them)."""
    if back is None:  # no group: a new probe, or a gateway restarted without persistence
        return group.totals or GroupTotals()
    if took_over or group.totals is None or back.writer is None:
        if group.totals is not None and group.totals.runs_total > back.totals.runs_total:
            return group.totals  # the gateway lost runs this state pushed: never go back
        return back.totals
    return group.totals  # the group is this writer's: its own totals are the newest


class WriterConflict(StateError):
    """Another writer owns the group; the refusal was pushed (exit 1)."""

    exit_code = 1  # type: ignore[assignment]

    def __init__(self, message: str, outcome: ProbeOutcome) -> None:
        super().__init__(message, FailureReason.WRITER_CONFLICT)
        self.outcome = outcome


def _refuse(
    outcome: ProbeOutcome,
    key: dict[str, str],
    transport: Transport,
    file: StateFile,
    group: GroupState,
    finished_at: float,
    owner: str | None,
) -> ProbeOutcome:
    """Another writer owns the group: keep the run as pending, push the refusal apart."""
    state.merge_run(group.pending, outcome.run, success=outcome.success, finished_at=finished_at)
    state.save(file, group)
    refused = outcome.failed(FailureReason.WRITER_CONFLICT)
    pushgateway.push(
        transport,
        {**key, "writer": group.writer},
        registry_for(refused, None, writer=group.writer),
    )
    raise WriterConflict(
        f"group {key} is owned by another writer ({owner}) that pushed less than the writer "
        f"lease ago; this run (writer {group.writer}) was kept in {file.path}, not counted, "
        "and the conflict (writer_conflict) was pushed with writer="
        f"{group.writer}. Run one probe per group (see docs/FAULTS.md)",
        refused,
    )


def push_failure(transport: Transport | Shards, key: dict[str, str], outcome: ProbeOutcome) -> None:
    """POST only the failure's gauges into the group: its counters stay as they are."""
    target = Shards.of(transport).for_key(key)
    pushgateway.push(target, key, registry_for(outcome, None), replace=False)


def _delete_quietly(transport: Transport, key: dict[str, str]) -> bool:
    """Delete a left-over group (a refusal, a moved group's old copy); False if that failed:
    the caller retries later, or `fioprobe gc` removes it."""
    try:
        pushgateway.delete_group(transport, key)
    except PushError:
        return False
    return True
