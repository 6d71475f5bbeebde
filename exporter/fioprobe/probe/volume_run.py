"""The volume part of one run in its child, kept to a deadline, and a child left stuck.

This process never touches the probed volume: the volume part (`volume_part`) runs in a
child it can abandon (`volume_worker`). When the deadline passes, the child is abandoned
and the run counts as `timeout`; a child stuck in the kernel is written down (`stuck`), so
the next run starts none behind it (docs/FAULTS.md, "How long a run can take").
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from fioprobe.errors import FailureReason, Interrupted
from fioprobe.probe import volume_worker
from fioprobe.probe.model import ProbeTarget
from fioprobe.probe.volume_part import VolumeRequest, VolumeResult
from fioprobe.publish.statefile import StateError
from fioprobe.target.stuck import Marker, Stuck

# The deadline of one run (docs/FAULTS.md, "How long a run can take"). The volume part runs
# in a child (`volume_worker`) that is abandoned when its deadline passes; the run then
# counts as `timeout`, and that is pushed by this process, which never touches the volume.
#: The volume part's time beyond fio's own timeout: opening and locking the directory,
#: making the run directory and writing the job file before fio starts; stopping fio after
#: its timeout (its job processes get up to 15 s to go) and removing its files.
VOLUME_MARGIN_SECONDS = 25.0
#: After a stop signal: how long the child has to stop fio and remove its files before it
#: is abandoned (fio's own stop takes up to 15 s, then 5 s for its main process).
STOP_GRACE_SECONDS = 21.0


@dataclass(slots=True)
class OnVolume(VolumeResult):
    """The volume part's result, and whether the volume hung (its child was abandoned)."""

    hung: bool = False


def run_volume_part(target: ProbeTarget, request: VolumeRequest, deadline: float) -> OnVolume:
    """The volume part in its child, kept to `deadline`; a previous run's child still stuck
    there means no new child at all (see `stuck`)."""
    marker = target.stuck_marker()
    notes: list[str] = []
    previous = _read_marker(marker, notes)
    if previous is not None and previous.still_there():
        return OnVolume(
            None, FailureReason.TIMEOUT,
            f"{request.directory}: the previous run is still stuck in the kernel on this "
            f"volume ({previous.describe()}); no new run was started",
            notes, hung=True,
        )  # fmt: skip
    worker = volume_worker.start("volume", request)
    try:
        result: VolumeResult = worker.wait(deadline)
    except volume_worker.Expired:
        return _abandoned(worker, target, request, marker, notes)
    except Interrupted:
        worker.stop(STOP_GRACE_SECONDS)
        if worker.process.poll() is None:  # it could not stop: stuck, left behind
            with contextlib.suppress(StateError):
                marker.record(worker.pid, worker.phase)
        raise
    except BaseException:
        worker.close()  # what it still said is forwarded, and it is reaped
        raise
    worker.close()
    if result.reason == FailureReason.BUSY and previous is not None:
        # The directory's lock is held: by the run left behind (in another pod, where its
        # process cannot be seen), as it has not pushed since.
        return OnVolume(
            None, FailureReason.TIMEOUT,
            f"{request.directory}: the previous run is still stuck on this volume "
            f"({previous.describe()}) and holds the directory; no new run was started",
            [*notes, *result.notes], hung=True,
        )  # fmt: skip
    if previous is not None and result.reason != FailureReason.BUSY:
        removed = "; what it left was removed" if result.reason is None else ""
        notes.append(f"the previous run's stuck process has ended ({previous.describe()})"
                     f"{removed}")  # fmt: skip
        _clear_marker(marker, notes)
    return OnVolume(
        result.run, result.reason, result.message, [*result.notes, *notes], result.etcd_refused
    )


def _abandoned(
    worker: volume_worker.Worker,
    target: ProbeTarget,
    request: VolumeRequest,
    marker: Marker,
    notes: list[str],
) -> OnVolume:
    phase = worker.phase
    stuck = worker.abandon()
    limit = request.timeout_seconds + VOLUME_MARGIN_SECONDS
    message = (
        f"{request.directory}: the volume did not answer within {limit:g}s (fio's timeout "
        f"{request.timeout_seconds:g}s + {VOLUME_MARGIN_SECONDS:g}s); the run was {phase}"
    )
    if stuck:
        message += (f"; its process (pid {worker.pid}) is stuck in the kernel and was left "
                    "behind")  # fmt: skip
        try:
            marker.record(worker.pid, phase)
        except StateError as exc:
            notes.append(f"the stuck process could not be written down: {exc}")
    return OnVolume(None, FailureReason.TIMEOUT, message, notes, hung=True)


def _read_marker(marker: Marker, notes: list[str]) -> Stuck | None:
    try:
        return marker.read()
    except StateError as exc:
        notes.append(f"the marker of a stuck run could not be read: {exc}")
        return None


def _clear_marker(marker: Marker, notes: list[str]) -> None:
    try:
        marker.clear()
    except StateError as exc:
        notes.append(f"the marker of a stuck run could not be removed: {exc}")
