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
(docs/FAULTS.md, "How long a run can take"). Beside this module: the data it passes
around (`model`), the volume part's child kept to its deadline (`volume_run`), the gp2
credit model applied at publish (`credits`), signals deferred while publishing (`signals`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from fioprobe.errors import FailureReason, FioprobeError, Interrupted, ProbeFailure
from fioprobe.fio.execute import fio_binary
from fioprobe.fio.model import Run
from fioprobe.fio.profiles import load_profile
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import PushError, Transport
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.probe import slot, volume_worker
from fioprobe.probe.credits import credit_model
from fioprobe.probe.model import ProbeTarget, RunResult, within
from fioprobe.probe.signals import Signals
from fioprobe.probe.volume_part import VolumeRequest
from fioprobe.probe.volume_run import VOLUME_MARGIN_SECONDS, run_volume_part
from fioprobe.publish.outcome import StateNotKept, publish, push_failure
from fioprobe.publish.statefile import StateError, StateFile
from fioprobe.target.volumes import model

#: The publish's time when the state lives on the probed volume (it then runs in a child
#: too): the state's lock, reads and fsyncs, and the Pushgateway requests between them.
PUBLISH_ON_VOLUME_SECONDS = 60.0


# --- one probe ----------------------------------------------------------------------------


def run_probe(
    target: ProbeTarget, jobs_dir: Path | None = None, *, deadline: float | None = None
) -> RunResult:
    """Run one profile on one target. Never raises for probe failures; see `outcome`.

    `deadline` (time.time()) ends the run's slot: fio is stopped by then, and not started
    when less than its budget is left (`slot`). Raises Interrupted for a stop signal, after
    the volume's child stopped fio and removed its files (or was abandoned when it could
    not within `volume_run.STOP_GRACE_SECONDS`).
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
        volume = run_volume_part(target, request, monotonic + timeout + VOLUME_MARGIN_SECONDS)
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
        on_volume = within(state_file.directory.path, target.directory)
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
    `volume_part.publish_on_volume`, which is handed this function) when it is on it.
    """
    with _failure_first(result):
        result.outcome = publish(
            _with_volume(result.outcome, target),
            target.grouping_key,
            transport,
            state_file,
            finished_at=time.time(),
            adjust=credit_model(result, target, state_file),
            lease_seconds=target.lease_seconds,
        )
    return result.outcome, result.message


def _publish_in_child(
    result: RunResult, target: ProbeTarget, transport: Transport | Shards, state_file: StateFile
) -> None:
    """`publish_result` in a child kept to PUBLISH_ON_VOLUME_SECONDS. Past it, the child is
    abandoned and the run becomes a `timeout` pushed from here, without the state."""
    worker = volume_worker.start("publish", publish_result, result, target, transport, state_file)
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
