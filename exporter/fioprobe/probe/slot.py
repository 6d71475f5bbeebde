"""A deadline for fio: the end of a time slot by which a probe's IO must be over.

`fioprobe run` may be given the end of a slot (the etcd members' probes take turns, so that
no two members' disks are loaded at once). fio's own timeout is then clamped so that fio
is gone by that time, and a profile that could not run its budgeted time before it is not
started at all: a run cut short by its slot would be a timeout anyway, after spending IO
in someone else's slot.

How long fio's IO can last after its timeout (`fio.execute.run_fio`, `kill_group`): the
timeout sends SIGTERM to fio's process group, and fio finishes the IO it has in flight and
stops its jobs; 5 s later whatever is left gets SIGKILL, and `kill_group` waits up to 10 s
more for the group to be gone (a job in a slow fsync ends only when the call returns).
That is FIO_STOP_SECONDS, 15 s: fio's timeout is set at least that long before the slot's
end. Only IO still stuck in the kernel 10 s after SIGKILL (a disk that hangs) can outlast
the slot, and nothing can stop that.

The clamp is computed in the prober, before anything starts (a slot already too short
starts no child and touches no volume), then again in the volume child before the run
directory is made (starting the child, opening and locking the directory took time of the
slot too; refused there, nothing is written) and just before fio starts, whose timeout is
what is left then. The slot's end crosses to the child as a `time.monotonic()` value: one
clock for every process of the host, which a wall-clock step does not move.
"""

from __future__ import annotations

import time

from fioprobe.errors import FailureReason, Interrupted, ProbeFailure
from fioprobe.fio.profiles import Profile

#: How long after its timeout fio's IO can go on (see the module docstring): kill_group's
#: 5 s from SIGTERM to SIGKILL and its 10 s wait for the group to be gone.
FIO_STOP_SECONDS = 15.0


def stop_fio_by(deadline: float | None) -> float | None:
    """The time.monotonic() by which fio's timeout must have fired, for a slot that ends at
    `deadline` (a time.time() value); None without a slot."""
    if deadline is None:
        return None
    return time.monotonic() + (deadline - time.time()) - FIO_STOP_SECONDS


def fio_timeout(profile: Profile, timeout: float, stop_by: float | None, where: str) -> float:
    """fio's timeout within the slot: `timeout`, or less so that fio is stopped by the
    slot's end. Raises ProbeFailure(`timeout`) when less than the profile's budgeted
    seconds are left: it is not started."""
    if stop_by is None:
        return timeout
    left = stop_by - time.monotonic()
    if left < profile.budget_seconds:
        raise ProbeFailure(
            FailureReason.TIMEOUT,
            f"{where}: the slot had only {max(0.0, left):.1f}s left for fio (its end less "
            f"{FIO_STOP_SECONDS:g}s to stop fio) for the {profile.name} profile budgeted at "
            f"{profile.budget_seconds}s; it was not started",
        )
    return min(timeout, left)


def explained(
    failure: ProbeFailure | Interrupted, used: float, otherwise: float
) -> ProbeFailure | Interrupted:
    """fio's failure, saying so when its timeout (`used`) was the slot's, shorter than the
    one it had `otherwise`: a timeout that a slot cut short is the schedule's doing, not
    necessarily a slow disk's, and the line should say which."""
    timed_out = isinstance(failure, ProbeFailure) and failure.reason == FailureReason.TIMEOUT
    if not timed_out or used >= otherwise:
        return failure
    return ProbeFailure(
        FailureReason.TIMEOUT,
        f"{failure} (the run's slot set that timeout: it fires {FIO_STOP_SECONDS:g}s before "
        "the slot ends, the time fio may take to stop)",
    )
