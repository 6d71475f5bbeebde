"""`fioprobe run --every`: the DaemonSets' loop, each node at its own offset, or the etcd
members each in a slot of its own.

Separate from `runner` (one pass over the configured targets) because only the DaemonSet
modes repeat themselves; the CronJobs run one pass and leave the schedule to Kubernetes.

Two schedules:

- **Offset** (`run_every`): each node starts at a fixed offset in the interval, a hash of its
  name, so a thousand nodes' probes reach the Pushgateway (and a shared Ceph cluster) spread
  out. Two nodes can overlap: with three nodes and etcd-fsync's 15 s run every 300 s,
  about 28 % of name sets have two runs at once.
- **Staggered** (`run_staggered`): the etcd members take turns (`stagger`: one slot per
  member in name order, none overlapping), so a probe adds IO to at most one member of the
  quorum at a time. The members are an explicit list or the nodes with a role label, read
  from the Kubernetes API before every run (`members`); the last list read is kept on the
  node, so that an API made slow by etcd's own slow disk (exactly when the probe matters)
  does not stop the probes.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from fioprobe.errors import ExitCode, FioprobeError, UsageError
from fioprobe.fio.profiles import load_profile
from fioprobe.probe import stagger
from fioprobe.probe.members import RECHECK_SECONDS, Members, Membership
from fioprobe.probe.runner import probe_target, run_config, say
from fioprobe.probe.signals import Signals
from fioprobe.probe.slot import FIO_STOP_SECONDS
from fioprobe.probe.stagger import Slot
from fioprobe.publish.statefile import (
    StateError,
    StateFile,
    untrusted,
)
from fioprobe.target.config import Config
from fioprobe.text import printable


def spread_offset(name: str, every_seconds: float) -> float:
    """Seconds into every interval at which the probes of `name` (a node) start.

    Uniform over the interval and fixed per name, so that a thousand nodes' probes arrive at
    the Pushgateway (and at a shared Ceph cluster) spread out rather than together, and a
    node's runs stay one interval apart.
    """
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * every_seconds


def run_every(
    config: Config,
    every_seconds: float,
    *,
    only_node: str | None,
    jobs_dir: Path | None,
    quiet: bool,
    cycles: int | None = None,
) -> int:
    """The per-node mode's loop (a DaemonSet's container): every probe once per interval.

    Each node starts at its own offset inside the interval (`spread_offset` of its name),
    counted from the Unix epoch, so a restarted pod keeps its slot and nodes never bunch up.
    A slot that is missed because the previous run took longer is skipped, not run late: the
    runs of one node stay an interval apart. Ends after `cycles` runs (None: until a signal,
    which ends the current run after its failure was pushed, as in `run_config`). Returns the
    status of the last run.
    """
    if not math.isfinite(every_seconds) or every_seconds <= 0:
        raise ValueError("the interval must be a positive number of seconds")
    offset = spread_offset(only_node or socket.gethostname(), every_seconds)
    status = int(ExitCode.OK)
    done = 0
    with _stoppable_between_runs():
        while cycles is None or done < cycles:
            now = time.time()
            slot = math.floor((now - offset) / every_seconds + 1) * every_seconds + offset
            if not quiet:
                say(f"next run in {slot - now:.0f}s (every {every_seconds:g}s, offset "
                    f"{offset:.0f}s)")  # fmt: skip
            _sleep_until(slot)
            status = run_config(config, only_node=only_node, jobs_dir=jobs_dir, quiet=quiet)
            done += 1
    return status


#: What a stop signal between runs leaves behind: nothing.
STOPPED_BETWEEN_RUNS = "no probe was running"


@contextmanager
def _stoppable_between_runs() -> Iterator[Signals]:
    """A stop signal (SIGTERM, SIGINT, SIGHUP) ends a loop at once between runs and between
    the probes of a run; while the members are read it is held back to the read's end
    (`_read_members`); during a probe, the probe's own handling applies (`run_and_publish`:
    fio stopped, the failure pushed). The loop is a DaemonSet container's PID 1, for which
    the kernel drops every signal it has no handler for: this handler is what lets a pod's
    deletion or rollout end it within its grace period."""
    signals = Signals(STOPPED_BETWEEN_RUNS)
    with signals.installed():
        yield signals


def _read_members(members: Members, signals: Signals, *, quick: bool = False) -> Membership:
    """The members, read with a stop signal held back (a read may rewrite the node's copy
    of the list, never to be left half written); one that came meanwhile ends the loop
    right after."""
    with signals.deferred():
        read = members.read(quick=quick)
    signals.raise_if_received(STOPPED_BETWEEN_RUNS)
    return read


# --- the staggered loop ----------------------------------------------------------------------


def run_staggered(
    config: Config,
    every_seconds: float,
    members: Members,
    *,
    node: str,
    jobs_dir: Path | None,
    quiet: bool,
    cycles: int | None = None,
    guard: float = stagger.GUARD_SECONDS,
) -> int:
    """The etcd members' loop: this node's probes once per interval, in its own slot.

    Before each run the members are read (`members`), this node's slot is computed
    (`stagger.next_slot`) and slept to; then they are read again and the slot computed with
    the fresh list. If it moved (a member joined or left), the run waits for the new slot
    from the next interval on, not later in this one: a member whose slot came earlier may
    have started on the old list before the change, and its run may reach into the new
    slot. For the same reason a run needs the same slot from a read done before its
    interval began (in steady state, the plan made right after the previous run): a node
    that first reads the members within an interval (a new or restarted pod) runs from the
    next interval on. Then any two runs of an interval each had their slot from a read
    before the interval's start and from one right before the run: one change of the
    members that moves both slots cannot be seen by one and missed by the other.

    The run gets the slot's end less the guard as its deadline (`run_config`), so its IO is
    over inside its slot. An interval does not run when this node is no member, when no
    member list was ever read and the API cannot be read, when the slot is too short for
    this node's profiles, or when a run of these groups is already recorded in it (the
    CronJob this loop replaces, or a run by hand, ran there).

    `cycles` counts intervals, whether they ran or not (None: until a signal). Returns the
    status of the last interval: its run's, 0 for one skipped as planned (no member, a
    slot that moved or was planned late, already run), 2 for one that could not run (no
    member list, a slot too short).
    """
    if not math.isfinite(every_seconds) or every_seconds <= 0:
        raise ValueError("the interval must be a positive number of seconds")
    needed, what = pass_seconds(config, jobs_dir)
    if members.fixed:
        names = members.read().names or ()
        problem = stagger.fit_problem(needed, every_seconds, max(len(names), 1), what, guard)
        if node in names and problem is not None:
            raise UsageError(f"run: {problem}")
    files = recorded_state_files(config, node)
    notes = _Notes()
    status = int(ExitCode.OK)
    done = 0
    own_end: float | None = None  # when this process's last run ended: its writes are its own
    not_before = 0.0  # after a slot moved: the next interval's start
    reads: list[tuple[float, tuple[str, ...] | None]] = []  # the last reads: (done at, names)
    with _stoppable_between_runs() as signals:
        while cycles is None or done < cycles:
            notes.forget("api")
            clock = time.time()
            now = max(clock, not_before)
            planned = _read_members(members, signals)
            reads = [*reads[-2:], (time.time(), planned.names)]
            plan = _plan(planned, node, now, every_seconds, needed, what, guard, notes)
            if not isinstance(plan, Slot):
                status, done = plan, done + 1
                if cycles is None or done < cycles:
                    _sleep_until((math.floor(now / every_seconds) + 1) * every_seconds)
                continue
            if not quiet:
                say(f"next run in {plan.start - clock:.0f}s: {plan.describe()} ({plan.members} "
                    f"members), its IO over {plan.guard:g}s before the slot ends")  # fmt: skip
            # The last read ends by the slot's start (and starts in its interval; see above).
            _sleep_until(max(plan.interval_start, plan.start - RECHECK_SECONDS))
            fresh = _read_members(members, signals, quick=True)
            reads = [*reads[-2:], (time.time(), fresh.names)]
            notes.say("api", fresh.note)
            again = None if fresh.names is None else stagger.slot_of(
                every_seconds, plan.interval, fresh.names, node, guard
            )  # fmt: skip
            done += 1
            if again is None or (again.index, again.members) != (plan.index, plan.members):
                say(f"the members changed before the run: {_shown(fresh.names)}; waiting for "
                    "this node's new slot in the next interval (a run of this one may have "
                    "started on the old list)")  # fmt: skip
                status, not_before = int(ExitCode.OK), plan.interval_start + every_seconds
                continue
            if not known_before(reads, plan, node, guard):
                say(f"this node had not read the members before the interval of its slot began: "
                    f"it runs from the next interval on ({plan.describe()}), when its slot is one "
                    "it read before the interval, as every member's is")  # fmt: skip
                status, not_before = int(ExitCode.OK), plan.interval_start + every_seconds
                continue
            recorded = recorded_since(files, plan.interval_start, own_end)
            if recorded is not None:
                path, written = recorded
                say(f"a run of this node's probes is recorded in this interval already ({path} "
                    f"written at {_clock(written)}): skipping to the next interval, so that no "
                    "probe runs twice in one")  # fmt: skip
                status = int(ExitCode.OK)
                continue
            _sleep_until(plan.start)
            if time.time() >= plan.deadline:
                say(f"woke up after the deadline of {plan.describe()}: skipping this interval")
                status = int(ExitCode.OK)
                continue
            status = run_config(config, only_node=node, jobs_dir=jobs_dir, quiet=quiet,
                                deadline=plan.deadline)  # fmt: skip
            own_end = time.time()
    return status


def known_before(
    reads: Sequence[tuple[float, tuple[str, ...] | None]], slot: Slot, node: str, guard: float
) -> bool:
    """Whether a read done before `slot`'s interval began gave this node the same slot
    (`run_staggered` says why a run needs one). Usually the plan's read, made right after
    the previous run; when that came late (a slow push at the end of the last slot), the read
    right before the previous run."""
    for done, names in reads:
        if done >= slot.interval_start or names is None:
            continue
        earlier = stagger.slot_of(slot.every, slot.interval, names, node, guard)
        if earlier is not None and (earlier.index, earlier.members) == (slot.index, slot.members):
            return True
    return False


def _plan(
    membership: Membership,
    node: str,
    now: float,
    every: float,
    needed: float,
    what: str,
    guard: float,
    notes: _Notes,
) -> Slot | int:
    """This node's next slot, or the status of an interval it does not run in (said)."""
    notes.say("api", membership.note)
    if membership.names is None:
        return int(ExitCode.USAGE)
    slot = stagger.next_slot(now, every, membership.names, node, guard)
    if slot is None:
        count, shown = len(membership.names), _shown(membership.names)
        notes.say("member", f"node {node} is not one of the {count} etcd members ({shown}): "
                  "it does not run while it is not")  # fmt: skip
        return int(ExitCode.OK)
    notes.say("member", f"node {node} is etcd member {slot.index + 1} of {slot.members} "
              f"({_shown(membership.names)}): it runs in {slot.describe()}")  # fmt: skip
    problem = stagger.fit_problem(needed, every, slot.members, what, guard)
    if problem is not None:
        notes.say("fit", f"not running: {problem}")
        return int(ExitCode.USAGE)
    notes.forget("fit")
    return slot


def pass_seconds(config: Config, jobs_dir: Path | None) -> tuple[float, str]:
    """How long a slot must give this node's pass, and which profiles that is, in words.

    Every profile runs its budgeted seconds (`fioprobe-budget-seconds`) at most, a second
    to start (the directory opened, locked, the job file written), and the last one's fio
    needs FIO_STOP_SECONDS after its timeout to be gone (`probe.slot`): `run_config` starts
    no profile that has less before the deadline. The first slot of an interval also
    gives the last read of the members (RECHECK_SECONDS) from its start. Pushing the
    outcomes between profiles is not counted: when it is slow, a later profile is refused
    by `run_config` (its timeout pushed). A profile that cannot be loaded counts nothing:
    its run fails before any IO.
    """
    budgets: list[tuple[str, int]] = []
    for target in config.targets:  # node-local ones too: this loop always has its node
        for profile in target.profiles:
            try:
                loaded = load_profile(profile.name, jobs_dir).with_overrides(profile.overrides)
            except FioprobeError:
                continue
            budgets.append((profile.name, loaded.budget_seconds))
    if not budgets:
        return 0.0, "this node's probes"
    needed = sum(seconds + _START_SECONDS for _, seconds in budgets)
    needed += FIO_STOP_SECONDS + RECHECK_SECONDS
    names = ", ".join(f"{name} {seconds}s" for name, seconds in budgets)
    plural = "s" if len(budgets) > 1 else ""
    return needed, (
        f"this node's pass (profile{plural} {names} budgeted, {_START_SECONDS:g}s each to "
        f"start, {FIO_STOP_SECONDS:g}s to stop fio, {RECHECK_SECONDS:g}s to read the members "
        "first)"
    )


#: A profile's time before fio starts: its directory opened and locked, the job file written.
_START_SECONDS = 1.0


def recorded_state_files(config: Config, node: str) -> list[StateFile]:
    """The state files of this node's groups that live off their probed volumes: each is
    rewritten by every run counted in it (saved before its push), so its modification time
    is when the group last ran. A state on the probed volume is not looked at (the volume
    may hang; its child alone touches it)."""
    files = []
    lease = config.pushgateway.writer_lease_seconds
    for target in config.targets:
        for profile in target.profiles:
            probe = probe_target(target, profile.name, profile.overrides, node, lease,
                                 owner=config.owner)  # fmt: skip
            if not probe.state_on_volume:
                files.append(probe.state_file())
    return files


def recorded_since(
    files: Sequence[StateFile], since: float, own_end: float | None
) -> tuple[Path, float] | None:
    """The first state file written at `since` or later, by a run other than this process's
    own (those ended by `own_end`), with that time; None when there is none.

    Such a write is a run recorded in the interval: a pod restarted after its run, or the
    CronJob this loop replaces. A file that is not the probe's own (`untrusted`) records
    nothing: a forged time must not stop the probes (the run then reports the file)."""
    for file in files:
        written = written_at(file)
        if written is not None and written >= since and (own_end is None or written > own_end):
            return file.path, written
    return None


def written_at(file: StateFile) -> float | None:
    """When `file` was last written, if it is there and the probe's own; None otherwise."""
    try:
        with file.directory.opened(create=False) as fd:
            info = os.lstat(file.name, dir_fd=fd)
    except (OSError, StateError):
        return None
    if not stat.S_ISREG(info.st_mode) or untrusted(info) is not None:
        return None
    return info.st_mtime


class _Notes:
    """Lines said once per change of what they say, by topic."""

    def __init__(self) -> None:
        self._said: dict[str, str] = {}

    def say(self, topic: str, line: str | None) -> None:
        if line is None:
            return
        if self._said.get(topic) != line:
            say(line)
            self._said[topic] = line

    def forget(self, topic: str) -> None:
        self._said.pop(topic, None)


def _sleep_until(when: float) -> None:
    """Sleep until the wall clock reads `when`. time.sleep counts on the monotonic clock, so
    a wall clock stepped by NTP meanwhile is caught by looking again (a few times at most)."""
    for _ in range(5):
        left = when - time.time()
        if left <= 0:
            return
        time.sleep(left)


def _shown(names: Sequence[str] | None) -> str:
    if not names:
        return "none"
    shown = ", ".join(printable(name, 80) for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(when)) + "Z"
