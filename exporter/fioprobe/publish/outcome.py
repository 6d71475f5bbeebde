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
When the group's own replica cannot be read, the run is kept as pending and nothing is
pushed.

The Pushgateway has no compare-and-swap, so two writers that read the group back at the same
moment (two brand-new states) would both push, and the later push would replace the earlier
one's run. A writer that read the group back therefore looks again after saving (and decides
again if it changed), and after its push waits a settle time and checks that the group holds
its push, or one that names it as its basis (`fioprobe_push_basis_id`: that writer read this
push and continued from it). Otherwise its run was replaced: it is kept as pending and
refused as `writer_conflict`, exactly as if the other writer owned the group.

With several Pushgateway replicas (`fioprobe.gateway.shards`) the group is pushed to its replica.
When the replicas changed since this state's last push, the group moves: it is read back
from the replica that held it (when a read-back is due), pushed to its new replica, and only
then deleted from the old one. A delete that fails is retried at the next run (the state
keeps naming the old replica until it succeeds); `fioprobe gc` removes such a copy too. An
old replica that cannot be read never stops the push to the group's own replica (`_look`).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

from prometheus_client.registry import CollectorRegistry

from fioprobe.errors import FailureReason
from fioprobe.gateway import api, readback
from fioprobe.gateway import defaults as push_defaults
from fioprobe.gateway.readback import ReadBack
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import PushError, Transport, TransportConfigError
from fioprobe.grouping import WRITER
from fioprobe.metrics.collector import ProbeOutcome, registry_for
from fioprobe.metrics.totals import (
    COUNT_LIMIT,
    PROBE_SCHEMA,
    GroupSchema,
    GroupTotals,
    combine,
    merge_run,
)
from fioprobe.publish import state
from fioprobe.publish.state import GroupState
from fioprobe.publish.statefile import StateError, StateFile
from fioprobe.text import printable

WRITER_LEASE_SECONDS = push_defaults.WRITER_LEASE_SECONDS


class Publishable(Protocol):
    """What the push path needs of a run's outcome, whatever the probe."""

    @property
    def success(self) -> bool: ...

    @property
    def failure_reason(self) -> FailureReason | None: ...

    def failed(self, reason: FailureReason) -> Self:
        """This outcome as one that could not be counted, for `reason` (a state that could
        not be kept, another writer's group): what is pushed without the group's totals."""
        ...


OutcomeT = TypeVar("OutcomeT", bound=Publishable)


@dataclass(frozen=True)
class GroupKind(Generic[OutcomeT]):
    """One kind of group the push path keeps: its names (`schema`: the job, what is read
    back, what a state file may hold), how an outcome adds to its totals, and what one push
    holds. The fio probes' is `PROBES`; the provisioning probe's is in `provision`."""

    schema: GroupSchema
    #: Add one outcome to the totals (in place), finished at the given time.
    merge: Callable[[GroupTotals, OutcomeT, float], None]
    #: The families of one push: the outcome with the group's totals, or with None its health
    #: alone (a failure POSTed beside the counters, a refused writer's group); the writer's
    #: identity and (push id, basis id) when the push carries the counters.
    registry: Callable[[OutcomeT, GroupTotals | None, str | None, tuple[int, int] | None],
                       CollectorRegistry]  # fmt: skip


def _merge_probe(totals: GroupTotals, outcome: ProbeOutcome, finished_at: float) -> None:
    merge_run(totals, outcome.run, success=outcome.success, finished_at=finished_at)


def _probe_registry(
    outcome: ProbeOutcome,
    totals: GroupTotals | None,
    writer: str | None,
    push_ids: tuple[int, int] | None,
) -> CollectorRegistry:
    return registry_for(outcome, totals, writer=writer, push_ids=push_ids)


#: The fio probes' groups (job="fioprobe").
PROBES: GroupKind[ProbeOutcome] = GroupKind(PROBE_SCHEMA, _merge_probe, _probe_registry)

#: A hook run inside the state lock before the merge: it may update model state kept beside
#: the totals (the gp2 credit balance) and returns the outcome to push.
Adjust = Callable[[ProbeOutcome, GroupTotals], ProbeOutcome]


class StateNotKept(StateError):
    """The state could not be used; the run's counts were not pushed, its failure was
    (unless `pushed` is False: the Pushgateway refused that too)."""

    def __init__(self, message: str, reason: FailureReason, *, pushed: bool) -> None:
        super().__init__(message, reason)
        self.pushed = pushed


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
    """Merge, save, push a fio probe's outcome; returns the outcome that was pushed.

    Raises PushError when nothing could be pushed (the run is saved and goes with the next
    push), and StateNotKept when the state could not be used (the failure was pushed).
    """
    return publish_group(PROBES, outcome, grouping_key, transport, state_file,
                         finished_at=finished_at, adjust=adjust,
                         lease_seconds=lease_seconds)  # fmt: skip


def publish_group(
    kind: GroupKind[OutcomeT],
    outcome: OutcomeT,
    grouping_key: dict[str, str],
    transport: Transport | Shards,
    state_file: StateFile,
    *,
    finished_at: float | None = None,
    adjust: Callable[[OutcomeT, GroupTotals], OutcomeT] | None = None,
    lease_seconds: float = WRITER_LEASE_SECONDS,
) -> OutcomeT:
    """`publish` for a group of any kind (see `GroupKind`)."""
    finished_at = time.time() if finished_at is None else finished_at
    settle = settle_seconds()
    shards = Shards.of(transport)
    replica = shards.for_key(grouping_key)
    try:
        with state_file.locked():
            return _publish_locked(
                kind, outcome, grouping_key, shards, state_file, finished_at, adjust,
                lease_seconds, settle,
            )  # fmt: skip
    except StateError as exc:
        if isinstance(exc, StateNotKept | WriterConflict):
            raise
        # A run that failed already keeps its own reason (a missing directory also has no
        # state directory; the cause to report is the directory).
        reason = exc.reason if outcome.success else outcome.failure_reason or exc.reason
        try:
            _push_health(kind, replica, grouping_key, outcome.failed(reason))
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
    kind: GroupKind[OutcomeT],
    outcome: OutcomeT,
    key: dict[str, str],
    shards: Shards,
    file: StateFile,
    finished_at: float,
    adjust: Callable[[OutcomeT, GroupTotals], OutcomeT] | None,
    lease_seconds: float,
    settle: float,
) -> OutcomeT:
    loaded = state.load(file, kind.schema)
    before = loaded or GroupState()
    transport = shards.for_key(key)
    # Replicas that may still hold a copy of this group from before the replicas changed.
    moved_from = _previous_replicas(shards, transport, before)
    # Those of them that could not be read in this run: asked once, never again in it.
    unreadable: set[str] = set()
    now = time.time()
    recent = before.last_push_at is not None and 0 <= now - before.last_push_at <= lease_seconds
    owns = before.claimed and before.totals is not None and recent
    took_over = False
    if adjust is not None:
        # Model state beside the totals (the gp2 credit balance) follows the IO the run did,
        # whether or not the run counts; done first so that nothing slow comes between the
        # last look at the group and the push.
        outcome = adjust(outcome, before.totals or GroupTotals())
    if owns and before.totals is not None:  # `owns` says it is not None; mypy needs it here
        group = before
        basis = group.push_id or 0
        kind.merge(before.totals, outcome, finished_at)
        state.save(file, group)
    else:
        # Look, decide, save, look again: a writer that pushed between the two looks would
        # be replaced by this push without its run being in it, so decide again from what
        # it pushed. What is left (another push between the second look and this push) is
        # caught by the look after the push.
        for _ in range(_LOOKS):
            group = copy.deepcopy(before)
            back = _read(kind, transport, moved_from, key, outcome, group, file, finished_at,
                         unreadable)  # fmt: skip
            for note in back.dropped if back is not None else ():
                print(f"fioprobe: read back of {key}: {note}", file=sys.stderr)
            owner = None if back is None else back.writer
            if back is not None and owner not in (None, group.writer):
                if back.push_time is None or now - back.push_time < lease_seconds:
                    return _refuse(
                        kind, outcome, key, transport, file, before, finished_at,
                        f"owned by another writer ({printable(owner, 80)}) that pushed less "
                        "than the writer lease ago",
                    )  # fmt: skip
                took_over = True
            group.totals = combine(_base(group, back, took_over), group.pending)
            group.pending = GroupTotals()
            # A state claims the group only once it has outlived a run: a state that is new
            # at every run (a container without a volume) is no owner, just a reader-writer.
            group.claimed = loaded is not None
            kind.merge(group.totals, outcome, finished_at)
            state.save(file, group)
            basis = 0 if back is None else back.push_id or 0
            # A failed second look is a failed push: the run is saved in the totals, the next
            # run reads the group back and pushes it.
            if _same(back, _look(kind, transport, moved_from, key, unreadable)):
                break
            took_over = False
        else:
            return _refuse(
                kind, outcome, key, transport, file, before, finished_at,
                f"pushed by other writers at every one of {_LOOKS} looks",
            )  # fmt: skip
    assert group.totals is not None
    push_id = secrets.randbelow(COUNT_LIMIT - 1) + 1
    writer = group.writer if group.claimed else None
    api.push(
        transport,
        key,
        kind.registry(outcome, group.totals, writer, (push_id, basis)),
        job=kind.schema.job,
    )
    group.last_push_at = time.time()
    group.push_id = push_id
    if not owns and _replaced(kind, transport, key, push_id, settle):
        return _refuse(
            kind, outcome, key, transport, file, before, finished_at,
            "pushed by another writer at the same moment, and that push does not contain "
            "this run",
        )  # fmt: skip
    # Only after the push: until the new replica holds the group, the old copy is the one
    # that counts. A failed delete keeps the old replica in the state: the next run retries.
    # A replica that could not be read is not asked again: its delete waits for a later run.
    moved = all(
        [previous.url not in unreadable and _delete_quietly(kind, previous, key)
         for previous in moved_from]
    )  # fmt: skip
    if moved:
        group.shard = transport.url
    # If this save fails, only the lease clock is lost: the next run reads the group back.
    with contextlib.suppress(StateError):
        state.save(file, group)
    if took_over:
        _delete_quietly(kind, transport, {**key, WRITER: group.writer})
    return outcome


#: How often a writer that reads the group back looks again when it changed under it.
_LOOKS = 3
ENV_SETTLE = "FIOPROBE_PUSH_SETTLE_SECONDS"
#: How long a writer that does not own its group waits after its push before it checks that
#: no other writer's push replaced it. A push of the other writer that lands later than this
#: after that writer's last look can still replace a run unseen (docs/FAULTS.md).
DEFAULT_SETTLE_SECONDS = 1.0


def settle_seconds() -> float:
    """The settle time: $FIOPROBE_PUSH_SETTLE_SECONDS if it is a number from 0 to 60."""
    raw = os.environ.get(ENV_SETTLE)
    if raw is None:
        return DEFAULT_SETTLE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 60:
        raise TransportConfigError(f"{ENV_SETTLE}={raw!r}: expected seconds from 0 to 60")
    return value


def _read(
    kind: GroupKind[OutcomeT],
    transport: Transport,
    moved_from: tuple[Transport, ...],
    key: dict[str, str],
    outcome: OutcomeT,
    group: GroupState,
    file: StateFile,
    finished_at: float,
    unreadable: set[str],
) -> ReadBack | None:
    """The group as its replica holds it (or, not there yet, where it was before it moved).

    When the group's own replica cannot be read, who owns the group is unknown: the run is
    kept as pending and nothing is pushed (the PushError goes on). Another replica that
    cannot be read does not stop the push (see `_look`).
    """
    try:
        return _look(kind, transport, moved_from, key, unreadable)
    except PushError:
        kind.merge(group.pending, outcome, finished_at)
        state.save(file, group)
        raise


def _look(
    kind: GroupKind[OutcomeT],
    transport: Transport,
    moved_from: tuple[Transport, ...],
    key: dict[str, str],
    unreadable: set[str],
) -> ReadBack | None:
    """The group on its own replica, else on a replica that may hold it from before a move.

    Only the own replica's answer is needed to push: one of the others that is down (or
    listed but gone) must not keep every new probe from being pushed for as long as it is.
    Such a replica is taken as not holding the group, as after a Pushgateway restart
    without persistence (at worst a counter reset, which rate() handles; never a run counted
    twice), logged once, and noted in `unreadable`: not asked again in this run (not even
    to delete), so the state keeps the replica it named before, and a later run deletes an
    old copy there once it answers.
    """
    back = readback.read_group(transport, key, kind.schema)
    for previous in moved_from if back is None else ():
        if previous.url in unreadable:
            continue
        try:
            back = readback.read_group(previous, key, kind.schema)
        except PushError as exc:
            unreadable.add(previous.url)
            print(
                f"fioprobe: read back of {key}: replica {previous.shown_url} is not the "
                f"group's own and could not be read ({exc}); pushing to its own replica "
                f"{transport.shown_url} without it",
                file=sys.stderr,
            )
            continue
        if back is not None:
            break
    return back


def _same(first: ReadBack | None, second: ReadBack | None) -> bool:
    """Whether two looks at a group saw the same push."""
    if first is None or second is None:
        return first is second
    return (first.push_time, first.push_id, first.writer, first.totals.runs_total) == (
        second.push_time,
        second.push_id,
        second.writer,
        second.totals.runs_total,
    )


def _replaced(
    kind: GroupKind[OutcomeT],
    transport: Transport,
    key: dict[str, str],
    push_id: int,
    settle: float,
) -> bool:
    """Whether another writer's push replaced this one without continuing from it.

    A push that continued from this one names it as its basis: this run is in it. The look
    waits `settle` seconds first: another writer whose last look came just before this push
    may still be sending a push based on what it saw then (32 ms was seen between two
    processes on two busy cores). A look that fails proves nothing either way; the push
    succeeded, so it counts.
    """
    time.sleep(settle)
    try:
        after = readback.read_group(transport, key, kind.schema)
    except PushError:
        return False
    if after is None:  # deleted since (`fioprobe gc`, an operator): nothing was replaced
        return False
    return push_id not in (after.push_id, after.basis_id)


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

    exit_code = 1

    def __init__(self, message: str, outcome: Publishable) -> None:
        super().__init__(message, FailureReason.WRITER_CONFLICT)
        self.outcome = outcome


def _refuse(
    kind: GroupKind[OutcomeT],
    outcome: OutcomeT,
    key: dict[str, str],
    transport: Transport,
    file: StateFile,
    group: GroupState,
    finished_at: float,
    why: str,
) -> OutcomeT:
    """This run cannot count now: keep it as pending (added when this writer takes the group
    over) and push the refusal into a group of its own, where FioProbeFailing sees it."""
    group = copy.deepcopy(group)
    kind.merge(group.pending, outcome, finished_at)
    state.save(file, group)
    refused = outcome.failed(FailureReason.WRITER_CONFLICT)
    api.push(
        transport,
        {**key, WRITER: group.writer},
        kind.registry(refused, None, group.writer, None),
        job=kind.schema.job,
    )
    raise WriterConflict(
        f"group {key} was {why}; this run (writer {group.writer}) was kept in {file.path}, "
        "not counted, and the conflict (writer_conflict) was pushed with writer="
        f"{group.writer}. Run one probe per group (see docs/FAULTS.md)",
        refused,
    )


def push_failure(transport: Transport | Shards, key: dict[str, str], outcome: ProbeOutcome) -> None:
    """POST only the failure's gauges into the group: its counters stay as they are."""
    _push_health(PROBES, transport, key, outcome)


def _push_health(
    kind: GroupKind[OutcomeT], transport: Transport | Shards, key: dict[str, str], outcome: OutcomeT
) -> None:
    target = Shards.of(transport).for_key(key)
    api.push(target, key, kind.registry(outcome, None, None, None), replace=False,
             job=kind.schema.job)  # fmt: skip


def _delete_quietly(kind: GroupKind[OutcomeT], transport: Transport, key: dict[str, str]) -> bool:
    """Delete a left-over group (a refusal, a moved group's old copy); False if that failed:
    the caller retries later, or `fioprobe gc` removes it."""
    try:
        api.delete_group(transport, key, job=kind.schema.job)
    except PushError:
        return False
    return True
