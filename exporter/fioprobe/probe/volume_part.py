"""What a probe does on its volume, run inside the volume worker's child (`volume_worker`).

`run_on_volume`: open and check the probe directory (for an etcd target, that it is on
etcd's filesystem: `etcd_filesystem`), lock it, check free space, make the run directory,
run fio (its timeout clamped to the run's slot: `slot`), remove the run directory. The
first failure is the run's: a clean-up that fails after it (a disk that broke during fio
also fails the removal) is said beside it, never instead of it.

A run directory that FUSE keeps "not empty" for a moment (`.fuse_hidden*` files of fio's,
released after fio exits) is `probedir`'s to wait for and, if they stay, to leave for the
next run.

`publish_on_volume`: the publish of a probe whose state lives on the probed volume. The
prober hands it the publish function (pickled by reference, so the child imports it when it
reads its request), as this module stands below the prober and imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe.errors import FailureReason, Interrupted, ProbeFailure
from fioprobe.fio.execute import run_fio
from fioprobe.fio.model import Run
from fioprobe.fio.profiles import Profile
from fioprobe.probe import slot
from fioprobe.probe.directory import ProbeDirectory, open_probe_directory
from fioprobe.probe.volume_worker import Report
from fioprobe.target import etcd_filesystem

if TYPE_CHECKING:  # the publishing side, imported only by the child that publishes
    from fioprobe.gateway.shards import Shards
    from fioprobe.gateway.transport import Transport
    from fioprobe.metrics.collector import ProbeOutcome
    from fioprobe.probe.model import ProbeTarget, RunResult
    from fioprobe.publish.statefile import StateFile

    #: What publishes one run's outcome (`prober.publish_result`): what was pushed, and the
    #: run's message.
    Publish = Callable[
        [RunResult, ProbeTarget, Transport | Shards, StateFile], tuple[ProbeOutcome, str]
    ]


@dataclass(frozen=True, slots=True)
class VolumeRequest:
    directory: Path
    require_mount_point: bool
    profile: Profile
    fio: str
    timeout_seconds: float
    #: etcd's data directory, for an etcd target: the probe directory must be on its
    #: filesystem (checked here, in the child: the stat can hang with the disk).
    etcd_data_dir: Path | None = None
    #: time.monotonic() by which fio's timeout must fire (the run's slot, `slot`), or None.
    stop_fio_by: float | None = None


@dataclass(slots=True)
class VolumeResult:
    run: Run | None
    reason: FailureReason | None = None
    message: str = ""
    #: What went wrong after the outcome was decided (clean-up): for the log, beside it.
    notes: list[str] = field(default_factory=list)
    #: The probe directory is not on etcd's filesystem (or etcd's data directory is not
    #: there): the run publishes no etcd role.
    etcd_refused: bool = False


def run_on_volume(request: VolumeRequest, *, report: Report) -> VolumeResult:
    """The volume part of one run (see the module docstring). Never raises for a failure."""
    result = VolumeResult(None)
    profile = request.profile
    try:
        report("opening the probe directory")
        with open_probe_directory(
            request.directory, require_mount_point=request.require_mount_point
        ) as directory:
            if request.etcd_data_dir is not None:
                report("checking that the probe directory is on etcd's filesystem")
                etcd_filesystem.check(str(directory.path), directory.fd, str(request.etcd_data_dir))
            with directory.locked():
                report("checking free space")
                directory.check_free_space(profile.footprint_bytes, f"the {profile.name} profile")
                # Refused here, a profile the slot has no room for leaves no trace: no run
                # directory made and removed.
                slot.fio_timeout(profile, request.timeout_seconds, request.stop_fio_by,
                                 str(request.directory))  # fmt: skip
                report("removing a left-over run directory and making the run directory")
                _run_in_run_dir(directory, request, result, report)
    except ProbeFailure as exc:
        if result.reason is None:
            result.run, result.reason, result.message = None, exc.reason, str(exc)
            result.etcd_refused = isinstance(exc, etcd_filesystem.NotEtcdsFilesystem)
        else:
            result.notes.append(f"then: {exc}")
    except Interrupted as exc:
        if result.reason is None:
            result.run, result.reason = None, FailureReason.INTERRUPTED
            result.message = f"interrupted by {exc}; fio stopped, its files removed"
    return result


def _run_in_run_dir(
    directory: ProbeDirectory, request: VolumeRequest, result: VolumeResult, report: Report
) -> None:
    def on_fio(pgid: int | None) -> None:
        report("running fio" if pgid else "fio has ended", fio_pgid=pgid)

    first: BaseException | None = None
    try:
        with directory.private_run_dir() as run_dir:
            # The slot's time went on while the run directory was made: fio's timeout is
            # taken from what is left now.
            timeout = slot.fio_timeout(
                request.profile, request.timeout_seconds, request.stop_fio_by,
                str(request.directory),
            )  # fmt: skip
            report("writing the job file")
            try:
                result.run = run_fio(request.fio, request.profile, run_dir, timeout, on_fio)
            except (ProbeFailure, Interrupted) as exc:
                first = slot.explained(exc, timeout, request.timeout_seconds)
                raise first from None
            report("removing the run directory")
    except (ProbeFailure, Interrupted) as exc:
        if first is None:  # the set-up failed, or the clean-up after a successful fio
            raise
        if exc is not first:  # the clean-up failed after fio had failed: fio's reason wins
            result.notes.append(f"then removing the run directory failed: {exc}")
        if isinstance(first, ProbeFailure):
            result.run, result.reason, result.message = None, first.reason, str(first)
        else:
            assert isinstance(first, Interrupted)
            result.run, result.reason = None, FailureReason.INTERRUPTED
            result.message = f"interrupted by {first}; fio stopped, its files removed"


def publish_on_volume(
    publish: Publish,
    result: RunResult,
    target: ProbeTarget,
    transport: Transport | Shards,
    state_file: StateFile,
    *,
    report: Report,
) -> tuple[ProbeOutcome, str]:
    """`publish` (the prober's `publish_result`) for a probe whose state lives on the
    probed volume."""
    report("publishing (the state is on the probed volume)")
    return publish(result, target, transport, state_file)
