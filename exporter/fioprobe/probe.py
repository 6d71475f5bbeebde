"""One probe: run one profile on one target, and publish exactly one outcome for it.

Whatever happens (a refused profile, a missing or read-only volume, a full or failing disk,
fio crashing or hanging, SIGTERM) the run ends in one outcome, success or a failure with a
reason from `errors.FailureReason`, and that outcome is published. Exceptions leave this
module only for what the caller must report on top: nothing could be pushed (PushError),
the state could not be used (StateNotKept), another writer owns the group (WriterConflict),
or a signal arrived (Interrupted, after the `interrupted` failure was published).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import state
from .collector import ProbeOutcome
from .config import VolumeConfig
from .errors import FailureReason, FioprobeError, Interrupted, ProbeFailure
from .fioexec import fio_binary, run_fio
from .model import Run
from .probedir import open_probe_directory
from .profiles import load_profile
from .publish import WRITER_LEASE_SECONDS, Adjust, StateNotKept, publish, push_failure
from .pushgateway import PushError, Transport
from .shards import Shards
from .state import GroupTotals
from .statefile import StateDir, StateFile, file_name, state_directory
from .volumes import GP2_CREDIT_BUCKET, credit_units, model, next_gp2_balance

#: The signals that stop a probe: the CronJob's SIGTERM, Ctrl-C, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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

    @property
    def grouping_key(self) -> dict[str, str]:
        key = {"storageclass": self.storageclass, "profile": self.profile}
        if self.node:
            key["node"] = self.node
        return key

    @property
    def state_inside(self) -> bool:
        """Whether the state lives in the probe directory (a dedicated volume's default)."""
        return self.state_path is None and self.state_dir is None and self.volume.dedicated

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


# --- signals ------------------------------------------------------------------------------


class _Signals:
    """SIGTERM/SIGINT/SIGHUP handling for one probe.

    While fio runs, a signal raises `Interrupted` at once (fio is then killed and its files
    removed). While the outcome is being published, a signal is only noted: stopping half
    way would push nothing and then claim a failure was pushed; the publish is bounded by
    the Pushgateway deadline, and `Interrupted` is raised right after it.
    """

    def __init__(self) -> None:
        self.deferring = False
        self.received: int | None = None

    def handler(self, signum: int, _frame: object) -> None:
        if self.received is not None:
            return  # a second signal must not interrupt the cleanup the first one started
        self.received = signum
        if not self.deferring:
            raise Interrupted(signum, signal.Signals(signum).name)

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handler) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False

    def raise_if_received(self, what_happened: str) -> None:
        if self.received is not None:
            name = signal.Signals(self.received).name
            raise Interrupted(self.received, name, what_happened)


# --- one probe ----------------------------------------------------------------------------


def run_probe(target: ProbeTarget, jobs_dir: Path | None = None) -> RunResult:
    """Run one profile on one target. Never raises for probe failures; see `outcome`."""
    started = time.time()
    monotonic = time.monotonic()
    run: Run | None = None
    reason: FailureReason | None = None
    message = ""
    try:
        profile = load_profile(target.profile, jobs_dir).with_overrides(target.overrides)
        fio = fio_binary()
        with (
            open_probe_directory(
                target.directory, require_mount_point=target.require_mount_point
            ) as directory,
            directory.locked(),
        ):
            directory.check_free_space(profile.footprint_bytes, f"the {profile.name} profile")
            timeout = target.timeout_seconds or profile.budget_seconds * 2 + 60
            with directory.private_run_dir() as run_dir:
                run = run_fio(fio, profile, run_dir, timeout)
    except ProbeFailure as exc:
        reason, message = exc.reason, str(exc)
    except FioprobeError as exc:
        if isinstance(exc, Interrupted):
            raise
        reason, message = exc.reason, str(exc)
    outcome = _outcome(
        target, run if reason is None else None, reason, time.monotonic() - monotonic
    )
    return RunResult(outcome, started, message)


def _outcome(
    target: ProbeTarget, run: Run | None, reason: FailureReason | None, seconds: float
) -> ProbeOutcome:
    volume = target.volume
    return ProbeOutcome(
        run=run,
        success=reason is None,
        duration_seconds=seconds,
        failure_reason=reason,
        volume_type=volume.type,
        provisioner=volume.provisioner,
        ran_on_node=os.environ.get("NODE_NAME", os.uname().nodename),
        owner=target.owner,
        etcd_disk=target.etcd_disk,
    )


def run_and_publish(
    target: ProbeTarget, transport: Transport | Shards, jobs_dir: Path | None = None,
    state_file: StateFile | None = None,
) -> RunResult:  # fmt: skip
    """Run one probe and publish its outcome, also when a signal cuts the run short.

    An interruption is published as a failure (reason `interrupted`), then `Interrupted`
    is raised so the process exits 128 + signal.
    """
    signals = _Signals()
    state_file = state_file or target.state_file()
    with signals.installed():
        started = time.time()
        try:
            result = run_probe(target, jobs_dir)
        except Interrupted as exc:
            outcome = _outcome(target, None, FailureReason.INTERRUPTED, time.time() - started)
            result = RunResult(outcome, started, f"interrupted by {exc}")
        if result.outcome.failure_reason == FailureReason.BUSY:
            # Another run holds this directory and publishes its own result.
            signals.raise_if_received("nothing was pushed: the run holding the directory does")
            return result
        stopped = result.outcome.failure_reason == FailureReason.INTERRUPTED
        with signals.deferred():
            try:
                if result.outcome.failure_reason in _REFUSED_DIRECTORY and target.state_inside:
                    # The directory was refused (absent, not mounted, not safe): the state
                    # inside it is not ours to write; it would land beneath the mount point.
                    _publish_failure_only(result, target, transport)
                else:
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
            except FioprobeError as exc:
                # A signal that came during the publish still ends the command.
                signals.raise_if_received(f"then publishing failed: {exc}")
                raise
        if stopped:
            signals.raise_if_received("fio stopped, its files removed, the failure pushed")
        signals.raise_if_received("the run had finished; its outcome was pushed first")
    return result


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
    volume_key = {k: v for k, v in target.grouping_key.items() if k != "profile"}
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
