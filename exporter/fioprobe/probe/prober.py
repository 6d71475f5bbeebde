"""One probe: run one profile on one target, and publish exactly one outcome for it.

Whatever happens (a refused profile, a missing or read-only volume, a full or failing disk,
fio crashing or hanging, SIGTERM) the run ends in one outcome, success or a failure with a
reason from `errors.FailureReason`, and that outcome is published. Exceptions leave this
module only for what the caller must report on top: nothing could be pushed (PushError),
the state could not be used (StateNotKept), another writer owns the group (WriterConflict),
or a signal arrived (Interrupted, after the `interrupted` failure was published).

This process never touches the probed volume: the volume part (and the publish, when the
state lives on that volume) runs in a child it can abandon (`volume_worker`), kept to one
deadline, so that a disk that hangs ends the run as `timeout` instead of hanging it
(docs/FAULTS.md, "How long a run can take").
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from fioprobe.errors import FailureReason, FioprobeError, Interrupted, ProbeFailure
from fioprobe.fio.execute import fio_binary
from fioprobe.fio.model import Run
from fioprobe.fio.profiles import load_profile
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import PushError, Transport
from fioprobe.grouping import PROFILE, probe_key
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.metrics.totals import GroupTotals
from fioprobe.probe import slot, volume_worker
from fioprobe.probe.signals import Signals
from fioprobe.probe.volume_part import VolumeRequest, VolumeResult
from fioprobe.publish import state
from fioprobe.publish.outcome import (
    WRITER_LEASE_SECONDS,
    Adjust,
    StateNotKept,
    publish,
    push_failure,
)
from fioprobe.publish.statefile import StateDir, StateError, StateFile, file_name, state_directory
from fioprobe.target.config import VolumeConfig
from fioprobe.target.stuck import Marker, Stuck
from fioprobe.target.volumes import GP2_CREDIT_BUCKET, credit_units, model, next_gp2_balance

# The deadline of one run (docs/FAULTS.md, "How long a run can take"). The volume part runs
# in a child (`volume_worker`) that is abandoned when its deadline passes; the run then
# counts as `timeout`, and that is pushed by this process, which never touches the volume.
#: The volume part's time beyond fio's own timeout: opening and locking the directory,
#: making the run directory and writing the job file before fio starts; stopping fio after
#: its timeout (its job processes get up to 15 s to go) and removing its files.
VOLUME_MARGIN_SECONDS = 25.0
#: The publish's time when the state lives on the probed volume (it then runs in a child
#: too): the state's lock, reads and fsyncs, and the Pushgateway requests between them.
PUBLISH_ON_VOLUME_SECONDS = 60.0
#: After a stop signal: how long the child has to stop fio and remove its files before it
#: is abandoned (fio's own stop takes up to 15 s, then 5 s for its main process).
STOP_GRACE_SECONDS = 21.0


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    storageclass: str
    directory: Path
    profile: str
    node: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    volume: VolumeConfig = field(default_factory=VolumeConfig)
    timeout_seconds: float | None = None
    require_mount_point: bool = False
    state_dir: Path | None = None
    #: One exact state file (`fioprobe probe --state`), instead of one per group in state_dir.
    state_path: Path | None = None
    lease_seconds: float = WRITER_LEASE_SECONDS
    #: The configuration the group belongs to, pushed as fioprobe_owner_info (see gc.py).
    owner: str | None = None
    #: Whether the disk holds etcd (fioprobe_info{etcd_disk}); None: not known (not pushed).
    etcd_disk: bool | None = None
    #: etcd's data directory: the probe directory must be on its filesystem (`etcd_filesystem`).
    etcd_data_dir: Path | None = None

    @property
    def grouping_key(self) -> dict[str, str]:
        return probe_key(self.storageclass, self.profile, self.node)

    @property
    def state_inside(self) -> bool:
        """Whether the state lives in the probe directory (a dedicated volume's default)."""
        return self.state_path is None and self.state_dir is None and self.volume.dedicated

    @property
    def state_directory(self) -> Path:
        """The directory of the state, by path alone (nothing on disk is looked at)."""
        return Path(os.path.abspath(self.state_file().directory.path))

    @property
    def state_on_volume(self) -> bool:
        """Whether the state lives under the probe directory, on the probed volume: then
        it is touched only by a child, like everything else there. Decided by path: a state
        directory that reaches the volume by another path (a bind mount) is not seen."""
        return _within(self.state_directory, self.directory)

    def stuck_marker(self) -> Marker:
        """Where a child left stuck on this volume is written down (see `stuck`)."""
        own = None if self.state_on_volume else self.state_directory
        return Marker.for_directory(self.directory, own)

    def state_file(self) -> StateFile:
        """Where the state lives follows the volume model (`statefile.state_directory`)."""
        if self.state_path is not None:
            parent = StateDir(self.state_path.parent, create_parents=True)
            return parent.file(self.state_path.name)
        directory = state_directory(
            self.directory, dedicated=self.volume.dedicated, state_dir=self.state_dir
        )
        return directory.group_file(self.grouping_key)


@dataclass(slots=True)
class RunResult:
    outcome: ProbeOutcome
    started_at: float
    message: str = ""
    #: The volume did not answer within the deadline (its child was abandoned): nothing on
    #: it is touched again in this run, the state there included.
    volume_hung: bool = False


# --- one probe ----------------------------------------------------------------------------


def run_probe(
    target: ProbeTarget, jobs_dir: Path | None = None, *, deadline: float | None = None
) -> RunResult:
    """Run one profile on one target. Never raises for probe failures; see `outcome`.

    `deadline` (time.time()) ends the run's slot: fio is stopped by then, and not started
    when less than its budget is left (`slot`). Raises Interrupted for a stop signal, after
    the volume's child stopped fio and removed its files (or was abandoned when it could
    not within STOP_GRACE_SECONDS).
    """
    started = time.time()
    monotonic = time.monotonic()
    run: Run | None = None
    reason: FailureReason | None = None
    message = ""
    hung = refused = False
    try:
        profile = load_profile(target.profile, jobs_dir).with_overrides(target.overrides)
        directory = Path(os.path.abspath(target.directory))
        stop_by = slot.stop_fio_by(deadline)
        timeout = target.timeout_seconds or profile.budget_seconds * 2 + 60
        timeout = slot.fio_timeout(profile, timeout, stop_by, str(directory))
        request = VolumeRequest(
            directory, target.require_mount_point, profile, fio_binary(), timeout,
            target.etcd_data_dir, stop_by,
        )  # fmt: skip
        volume = _on_volume(target, request, monotonic + timeout + VOLUME_MARGIN_SECONDS)
        run, reason, message, hung = volume.run, volume.reason, volume.message, volume.hung
        refused = volume.etcd_refused
        if volume.notes:
            message = "; ".join(filter(None, [message, *volume.notes]))
    except ProbeFailure as exc:
        reason, message = exc.reason, str(exc)
    except FioprobeError as exc:
        if isinstance(exc, Interrupted):
            raise
        reason, message = exc.reason, str(exc)
    seconds = time.monotonic() - monotonic
    outcome = _outcome(target, run if reason is None else None, reason, seconds, monotonic)
    if refused:  # not etcd's filesystem: this run measured no disk of etcd's, and says so
        outcome = replace(outcome, etcd_disk=False)
    return RunResult(outcome, started, message, volume_hung=hung)


@dataclass(slots=True)
class _Volume(VolumeResult):
    hung: bool = False


def _on_volume(target: ProbeTarget, request: VolumeRequest, deadline: float) -> _Volume:
    """The volume part in its child, kept to `deadline`; a previous run's child still stuck
    there means no new child at all (see `stuck`)."""
    marker = target.stuck_marker()
    notes: list[str] = []
    previous = _read_marker(marker, notes)
    if previous is not None and previous.still_there():
        return _Volume(
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
        return _Volume(
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
    return _Volume(
        result.run, result.reason, result.message, [*result.notes, *notes], result.etcd_refused
    )


def _abandoned(
    worker: volume_worker.Worker,
    target: ProbeTarget,
    request: VolumeRequest,
    marker: Marker,
    notes: list[str],
) -> _Volume:
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
    return _Volume(None, FailureReason.TIMEOUT, message, notes, hung=True)


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


def _outcome(
    target: ProbeTarget,
    run: Run | None,
    reason: FailureReason | None,
    seconds: float,
    started_monotonic: float | None = None,
) -> ProbeOutcome:
    volume = target.volume
    return ProbeOutcome(
        run=run,
        success=reason is None,
        duration_seconds=seconds,
        started_monotonic=started_monotonic,
        failure_reason=reason,
        volume_type=volume.type,
        provisioner=volume.provisioner,
        ran_on_node=os.environ.get("NODE_NAME", os.uname().nodename),
        owner=target.owner,
        etcd_disk=target.etcd_disk,
    )


def run_and_publish(
    target: ProbeTarget, transport: Transport | Shards, jobs_dir: Path | None = None,
    state_file: StateFile | None = None, *, deadline: float | None = None,
) -> RunResult:  # fmt: skip
    """Run one probe and publish its outcome, also when a signal cuts the run short.

    An interruption is published as a failure (reason `interrupted`), then `Interrupted`
    is raised so the process exits 128 + signal. `deadline`: see `run_probe`; the publish
    is not bound by it (a run's outcome is always pushed).
    """
    signals = Signals()
    state_file = state_file or target.state_file()
    with signals.installed():
        started = time.time()
        monotonic = time.monotonic()
        try:
            result = run_probe(target, jobs_dir, deadline=deadline)
        except Interrupted as exc:
            outcome = _outcome(target, None, FailureReason.INTERRUPTED,
                               time.monotonic() - monotonic, monotonic)  # fmt: skip
            result = RunResult(outcome, started, f"interrupted by {exc}")
        if result.outcome.failure_reason == FailureReason.BUSY:
            # Another run holds this directory. It publishes its own result if it is alive;
            # if it is stuck in the kernel on a hung volume (a previous pod's child, which
            # no marker of this pod knows), only this failure says anything: pushed beside
            # the group's counters, which stay as the holder left them.
            with signals.deferred():
                _publish_failure_only(result, target, transport)
            signals.raise_if_received("the failure (busy) was pushed")
            return result
        stopped = result.outcome.failure_reason == FailureReason.INTERRUPTED
        on_volume = _within(state_file.directory.path, target.directory)
        with signals.deferred():
            try:
                if on_volume and (
                    result.volume_hung or result.outcome.failure_reason in _REFUSED_DIRECTORY
                ):
                    # The directory was refused (absent, not mounted, not safe): the state
                    # inside it is not ours to write; it would land beneath the mount point.
                    # Or the volume hangs: the state there would hang this process too.
                    _publish_failure_only(result, target, transport)
                elif on_volume:
                    _publish_in_child(result, target, transport, state_file)
                else:
                    result.outcome, result.message = publish_result(
                        result, target, transport, state_file
                    )
            except FioprobeError as exc:
                # A signal that came during the publish still ends the command.
                signals.raise_if_received(f"then publishing failed: {exc}")
                raise
        if stopped:
            signals.raise_if_received("fio stopped, its files removed, the failure pushed")
        signals.raise_if_received("the run had finished; its outcome was pushed first")
    return result


def publish_result(
    result: RunResult, target: ProbeTarget, transport: Transport | Shards, state_file: StateFile
) -> tuple[ProbeOutcome, str]:
    """Merge, save and push the outcome (`publish`); what was pushed and the run's message.

    Runs in this process when the state is off the probed volume, in a child (through
    `volume_part.publish_on_volume`) when it is on it.
    """
    with _failure_first(result):
        result.outcome = publish(
            _with_volume(result.outcome, target),
            target.grouping_key,
            transport,
            state_file,
            finished_at=time.time(),
            adjust=_credit_model(result, target, state_file),
            lease_seconds=target.lease_seconds,
        )
    return result.outcome, result.message


def _publish_in_child(
    result: RunResult, target: ProbeTarget, transport: Transport | Shards, state_file: StateFile
) -> None:
    """`publish_result` in a child kept to PUBLISH_ON_VOLUME_SECONDS. Past it, the child is
    abandoned and the run becomes a `timeout` pushed from here, without the state."""
    worker = volume_worker.start("publish", result, target, transport, state_file)
    try:
        result.outcome, result.message = worker.wait(time.monotonic() + PUBLISH_ON_VOLUME_SECONDS)
    except volume_worker.Expired:
        phase = worker.phase
        stuck = worker.abandon()
        hung = (
            f"{target.state_directory}: the state on the probed volume did not answer within "
            f"{PUBLISH_ON_VOLUME_SECONDS:g}s (the publish was {phase}); the run is not counted"
        )
        if result.outcome.success:
            result.outcome = result.outcome.failed(FailureReason.TIMEOUT)
            result.message = hung
        else:  # the run's own failure stays its reason; the hang goes beside it
            result.message = f"{result.message}; then: {hung}"
        if stuck:
            result.message += f"; its process (pid {worker.pid}) was left behind"
            try:
                target.stuck_marker().record(worker.pid, phase)
            except StateError as exc:
                result.message += f" (not written down: {exc})"
        result.volume_hung = True
        _publish_failure_only(result, target, transport)
        return
    except volume_worker.WorkerDied as exc:
        # Killed from outside or a crash: whether the state was saved is unknown, so the run
        # is not counted; its failure still goes out, from here.
        worker.close()
        if result.outcome.success:
            result.outcome = result.outcome.failed(FailureReason.STATE_ERROR)
            result.message = str(exc)
        else:
            result.message = f"{result.message}; then: {exc}"
        _publish_failure_only(result, target, transport)
        return
    except BaseException:
        worker.close()
        raise
    worker.close()


def _within(path: Path, directory: Path) -> bool:
    """Whether `path` is `directory` or below it, by path alone (nothing is looked at)."""
    path, directory = Path(os.path.abspath(path)), Path(os.path.abspath(directory))
    return path == directory or directory in path.parents


#: Failures after which the probe directory, and so a state kept inside it, is not touched.
_REFUSED_DIRECTORY = frozenset({FailureReason.NO_DIRECTORY, FailureReason.UNSAFE_TARGET})


def _publish_failure_only(
    result: RunResult, target: ProbeTarget, transport: Transport | Shards
) -> None:
    """Push the failure beside the group's counters, which stay as they are."""
    reason = result.outcome.failure_reason or FailureReason.FIO_ERROR
    try:
        push_failure(transport, target.grouping_key, _with_volume(result.outcome, target))
    except PushError as exc:
        raise StateNotKept(
            f"{result.message}; the failure ({reason}) could not be pushed: {exc}",
            reason,
            pushed=False,
        ) from None


@contextmanager
def _failure_first(result: RunResult) -> Iterator[None]:
    """A run that failed on its own keeps its own story when its state is also unusable
    (a missing directory has no state directory either): its failure was pushed, and the
    reason to report is the run's, not the state's."""
    try:
        yield
    except StateNotKept as exc:
        if result.outcome.success or not exc.pushed:
            raise
        result.message += f" (its state could not be kept: {exc.args[0].split(';')[0]})"


def _with_volume(outcome: ProbeOutcome, target: ProbeTarget) -> ProbeOutcome:
    volume = target.volume
    if volume.type == "unknown" and volume.size_bytes is None and volume.iops is None:
        return outcome
    gauges = model(
        volume.type, volume.size_bytes, volume.iops, volume.throughput_bytes_per_second
    ).gauges()
    return replace(outcome, volume=gauges)


def _credit_model(result: RunResult, target: ProbeTarget, state_file: StateFile) -> Adjust | None:
    """For a dedicated gp2 volume: advance its modelled credit balance.

    Every profile on the volume spends from the same bucket, so the credit file has a lock
    of its own (taken inside publish's lock on the group's state: always in that order).
    """
    volume = target.volume
    if volume.type != "gp2" or not volume.dedicated:
        return None
    vmodel = model("gp2", volume.size_bytes)
    volume_key = {k: v for k, v in target.grouping_key.items() if k != PROFILE}
    credits_file = state_file.directory.file(file_name(volume_key, "credits-"))

    def adjust(outcome: ProbeOutcome, _totals: GroupTotals) -> ProbeOutcome:
        run = outcome.run
        stats = [s for j in run.jobs for s in j.ops.values()] if run else []
        units = credit_units(sum(s.total_ios for s in stats), sum(s.io_bytes for s in stats))
        with credits_file.locked():  # other profiles of the volume
            previous = state.load_credits(credits_file)
            balance = next_gp2_balance(
                vmodel,
                previous.balance if previous else None,
                previous.at if previous else None,
                result.started_at,
                outcome.duration_seconds,
                units,
            )
            finished = result.started_at + outcome.duration_seconds
            state.save_credits(credits_file, state.VolumeCredits(balance, finished))
        return replace(outcome, volume=vmodel.gauges(balance / GP2_CREDIT_BUCKET))

    return adjust
