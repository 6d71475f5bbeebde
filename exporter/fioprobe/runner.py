"""Run one fio profile safely and publish the outcome.

The safety rules of DESIGN.md, in the order they are applied:
1. The probe directory must be a real directory: not a symlink, not a device.
2. One run at a time per directory: a non-blocking flock on the directory itself.
3. The profile is checked (no files, devices, logs or commands; within its budget).
4. Free space is checked before anything is written: not enough -> `no_space`.
5. fio runs in a fresh private subdirectory (<dir>/.fioprobe-run), in its own process
   group, under a wall-clock timeout. On timeout, SIGTERM or SIGINT the whole group is
   killed. The subdirectory is removed in every case.
6. fio's output is parsed whole; a malformed output is a `parse_error`, nothing partial.
Every outcome, success or failure, is published (merged, saved, pushed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import state
from .collector import ProbeOutcome
from .config import Config, TargetConfig, VolumeConfig
from .fioparse import FioOutputError, parse_file
from .model import Run
from .profiles import Profile, ProfileError, load_profile
from .publish import Adjust, publish
from .pushgateway import PushError, Transport
from .state import GroupTotals, StateError
from .volumes import GP2_CREDIT_BUCKET, credit_units, model, next_gp2_balance

RUN_SUBDIR = ".fioprobe-run"
STATE_SUBDIR = ".fioprobe-state"
#: Space kept free beyond what the profile writes, so a probe never fills a disk to the brim.
FREE_SPACE_MARGIN_BYTES = 8 * 1024 * 1024
#: fio 3.1 is the oldest with *_ns latencies and json+ bins the model relies on.
MIN_FIO_VERSION = (3, 1)
ENOSPC_TEXT = "No space left on device"


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived while a probe ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class ProbeRefused(Exception):
    """A safety rule refused the run before fio started; `reason` is a failure reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    storageclass: str
    directory: Path
    profile: str
    node: str | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    volume: VolumeConfig = field(default_factory=VolumeConfig)
    timeout_seconds: float | None = None

    @property
    def grouping_key(self) -> dict[str, str]:
        key = {"storageclass": self.storageclass, "profile": self.profile}
        if self.node:
            key["node"] = self.node
        return key


@dataclass(slots=True)
class RunResult:
    outcome: ProbeOutcome
    started_at: float
    message: str = ""


# --- signals ------------------------------------------------------------------------------


@contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGTERM/SIGINT into `Interrupted` so cleanup code runs, then restore handlers."""

    def handler(signum: int, _frame: object) -> None:
        # Further signals must not interrupt the cleanup this one starts.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# --- checks -------------------------------------------------------------------------------


def fio_binary() -> str:
    found = shutil.which("fio")
    if found is None:
        raise ProbeRefused("fio_missing", "fio is not installed (apt-get install fio)")
    try:
        version = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeRefused("fio_missing", f"{found} does not run: {exc}") from None
    check_fio_version(found, version)
    return found


def check_fio_version(binary: str, version: str) -> None:
    """Refuse fio older than MIN_FIO_VERSION: it lacks the *_ns fields and json+ bins."""
    match = re.search(r"fio-(\d+)\.(\d+)", version)
    if not match or (int(match.group(1)), int(match.group(2))) < MIN_FIO_VERSION:
        wanted = ".".join(map(str, MIN_FIO_VERSION))
        raise ProbeRefused(
            "fio_missing", f"{binary} reports {version!r}; fioprobe needs fio {wanted} or newer"
        )


def check_directory(directory: Path) -> Path:
    """The probe directory, if it is a real directory; refuses symlinks and devices."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        raise ProbeRefused(
            "unsafe_target", f"{directory}: probe directory does not exist"
        ) from None
    if stat.S_ISLNK(info.st_mode):
        raise ProbeRefused("unsafe_target", f"{directory}: is a symlink; give the real directory")
    if stat.S_ISBLK(info.st_mode) or stat.S_ISCHR(info.st_mode):
        raise ProbeRefused(
            "unsafe_target", f"{directory}: is a device; fioprobe never writes to devices"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ProbeRefused("unsafe_target", f"{directory}: is not a directory")
    return directory.absolute()


def check_free_space(directory: Path, profile: Profile) -> None:
    needed = profile.size_bytes + FREE_SPACE_MARGIN_BYTES
    usage = os.statvfs(directory)
    free = usage.f_bavail * usage.f_frsize
    if free < needed:
        raise ProbeRefused(
            "no_space",
            f"{directory}: {free} bytes free, the {profile.name} profile needs {needed} "
            f"({profile.size_bytes} for its file + {FREE_SPACE_MARGIN_BYTES} margin); "
            "nothing was written",
        )


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """flock on the directory itself: no lock file is left behind in the probe directory."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ProbeRefused(
                "busy", f"{directory}: another probe is running in this directory"
            ) from None
        yield
    finally:
        os.close(fd)


@contextmanager
def private_run_dir(directory: Path) -> Iterator[Path]:
    """A fresh subdirectory for fio's files, removed afterwards whatever happens."""
    run_dir = directory / RUN_SUBDIR
    _remove_run_dir(run_dir)  # left over by a run that was SIGKILLed
    os.mkdir(run_dir, 0o700)
    try:
        yield run_dir
    finally:
        _remove_run_dir(run_dir)


def _remove_run_dir(run_dir: Path) -> None:
    try:
        info = os.lstat(run_dir)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ProbeRefused("unsafe_target", f"{run_dir}: exists and is not our directory")
    shutil.rmtree(run_dir)


# --- running fio --------------------------------------------------------------------------


def run_fio(fio: str, profile: Profile, run_dir: Path, timeout: float) -> tuple[Run | None, str]:
    """Run fio; returns (parsed run or None, failure reason or '') and fio's complaint."""
    job_file = run_dir / "probe.fio"
    job_file.write_text(profile.render(run_dir), encoding="utf-8")
    output = run_dir / "result.json"
    command = [fio, "--output-format=json+", f"--output={output}", str(job_file)]
    process = subprocess.Popen(
        command,
        cwd=run_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: killed as a whole
    )
    try:
        _, stderr = process.communicate(timeout=timeout)
    except BaseException:  # timeout, Interrupted, anything: fio must not outlive us
        _kill_group(process)
        raise
    complaint = stderr.decode("utf-8", errors="replace").strip()
    if ENOSPC_TEXT in complaint:
        raise ProbeRefused("no_space", f"fio ran out of space: {_first_line(complaint)}")
    try:
        run = parse_file(output)
    except FioOutputError as exc:
        if process.returncode != 0:
            raise ProbeRefused(
                "fio_error", f"fio exited {process.returncode}: {_first_line(complaint)}"
            ) from None
        raise ProbeRefused("parse_error", str(exc)) from None
    if process.returncode != 0 or run.failed_jobs:
        errors = ", ".join(f"{j.name}: error {j.error}" for j in run.failed_jobs)
        if any(job.error == 28 for job in run.failed_jobs):  # ENOSPC
            raise ProbeRefused("no_space", f"fio ran out of space ({errors})")
        raise ProbeRefused(
            "fio_error",
            f"fio exited {process.returncode}: {errors or _first_line(complaint)}",
        )
    return run, complaint


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Stop fio's whole process group: SIGTERM, then SIGKILL, until no member is left.

    Waiting for fio's main process is not enough: a job process stuck in a slow fsync
    outlives it for as long as the syscall takes, and would still hold files open.
    """
    deadline = time.monotonic() + 15.0
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        until = min(deadline, time.monotonic() + grace)
        while time.monotonic() < until:
            process.poll()  # reap the main process so it does not count as alive
            if not _group_members(process.pid):
                break
            time.sleep(0.05)
        else:
            continue
        break
    process.wait()


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry.name))
    return members


def _first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else "(no message)"


# --- one probe ----------------------------------------------------------------------------


def run_probe(target: ProbeTarget, jobs_dir: Path | None = None) -> RunResult:
    """Run one profile on one target. Never raises for probe failures; see `outcome`."""
    started = time.time()
    monotonic = time.monotonic()
    volume = target.volume
    run: Run | None = None
    reason: str | None = None
    message = ""
    try:
        profile = load_profile(target.profile, jobs_dir).with_overrides(target.overrides)
        directory = check_directory(target.directory)
        fio = fio_binary()
        with directory_lock(directory):
            check_free_space(directory, profile)
            timeout = target.timeout_seconds or profile.budget_seconds * 2 + 60
            with private_run_dir(directory) as run_dir:
                try:
                    run, message = run_fio(fio, profile, run_dir, timeout)
                except subprocess.TimeoutExpired:
                    reason, message = "timeout", f"fio did not finish within {timeout:g}s"
    except ProfileError as exc:
        reason, message = "unsafe_target", str(exc)
    except ProbeRefused as exc:
        reason, message = exc.reason, str(exc)
    except OSError as exc:
        reason = "no_space" if exc.errno == 28 else "fio_error"
        message = f"{exc.filename or target.directory}: {exc.strerror}"
    outcome = ProbeOutcome(
        run=run if reason is None else None,
        success=reason is None,
        duration_seconds=time.monotonic() - monotonic,
        failure_reason=reason,
        volume_type=volume.type,
        provisioner=volume.provisioner,
        ran_on_node=os.environ.get("NODE_NAME", os.uname().nodename),
    )
    return RunResult(outcome, started, message)


def run_and_publish(
    target: ProbeTarget,
    transport: Transport,
    state_path: Path,
    jobs_dir: Path | None = None,
) -> ProbeOutcome:
    """Run one probe and publish its outcome, even when SIGTERM/SIGINT cut it short.

    An interruption is published as a failure (reason `interrupted`), then re-raised so
    the process exits non-zero.
    """
    interrupted: Interrupted | None = None
    with interruptible():
        started = time.time()
        try:
            result = run_probe(target, jobs_dir)
        except Interrupted as exc:
            interrupted = exc
            result = RunResult(
                ProbeOutcome(
                    None,
                    False,
                    time.time() - started,
                    "interrupted",
                    target.volume.type,
                    target.volume.provisioner,
                ),
                started,
                f"interrupted by {exc}",
            )
        if result.message and not result.outcome.success:
            print(f"fioprobe: {target.grouping_key}: {result.message}", file=sys.stderr)
        if result.outcome.failure_reason == "busy":
            # Another run holds this directory and will push its own result.
            return result.outcome
        outcome = publish(
            _with_volume(result, target),
            target.grouping_key,
            transport,
            state_path,
            finished_at=time.time(),
            adjust=_credit_model(result, target, state_path),
        )
    if interrupted is not None:
        raise interrupted
    return outcome


def _with_volume(result: RunResult, target: ProbeTarget) -> ProbeOutcome:
    volume = target.volume
    if volume.type == "unknown" and volume.size_bytes is None and volume.iops is None:
        return result.outcome
    gauges = model(
        volume.type, volume.size_bytes, volume.iops, volume.throughput_bytes_per_second
    ).gauges()
    return replace(result.outcome, volume=gauges)


def _credit_model(result: RunResult, target: ProbeTarget, state_path: Path) -> Adjust | None:
    """For a dedicated gp2 volume: advance its modelled credit balance.

    Every profile on the volume spends from the same bucket, so the credit file has a lock
    of its own (taken inside publish's lock on the group's state: always in that order).
    """
    volume = target.volume
    if volume.type != "gp2" or not volume.dedicated:
        return None
    vmodel = model("gp2", volume.size_bytes)
    credits_path = state_path.parent / _slug(
        {k: v for k, v in target.grouping_key.items() if k != "profile"}, "credits-"
    )

    def adjust(outcome: ProbeOutcome, _totals: GroupTotals) -> ProbeOutcome:
        run = outcome.run
        stats = [s for j in run.jobs for s in j.ops.values()] if run else []
        units = credit_units(sum(s.total_ios for s in stats), sum(s.io_bytes for s in stats))
        with state.locked(credits_path, wait=True):  # other profiles of the volume
            previous = state.load_credits(credits_path)
            balance = next_gp2_balance(
                vmodel,
                previous.balance if previous else None,
                previous.at if previous else None,
                result.started_at,
                outcome.duration_seconds,
                units,
            )
            finished = result.started_at + outcome.duration_seconds
            state.save_credits(credits_path, state.VolumeCredits(balance, finished))
        return replace(outcome, volume=vmodel.gauges(balance / GP2_CREDIT_BUCKET))

    return adjust


# --- fioprobe run -------------------------------------------------------------------------


def run_config(config: Config, *, only_node: str | None, jobs_dir: Path | None, quiet: bool) -> int:
    """Run every configured probe once, in order; exit 0 only if all succeeded and pushed."""
    transport = Transport.from_config(config.pushgateway)
    status = 0
    for target_config in config.targets:
        if target_config.node_local and not only_node:
            print(
                f"fioprobe: skipping node-local target {target_config.name}: no --node/NODE_NAME",
                file=sys.stderr,
            )
            status = max(status, 2)
            continue
        for profile in target_config.profiles:
            target = _probe_target(target_config, profile.name, profile.overrides, only_node)
            state_path = _state_path(target_config, target)
            try:
                outcome = run_and_publish(target, transport, state_path, jobs_dir)
            except PushError as exc:
                print(
                    f"fioprobe: error: {exc} (kept in {state_path} for the next push)",
                    file=sys.stderr,
                )
                status = max(status, 4)
                continue
            except StateError as exc:
                print(f"fioprobe: error: {exc}", file=sys.stderr)
                status = max(status, 2)
                continue
            except Interrupted as exc:
                print(f"fioprobe: interrupted by {exc}; failure pushed", file=sys.stderr)
                return 128 + exc.signum
            if not quiet:
                verdict = "ok" if outcome.success else f"FAILED ({outcome.failure_reason})"
                seconds = outcome.duration_seconds
                print(f"fioprobe: {target.grouping_key}: {verdict} in {seconds:.1f}s",
                      file=sys.stderr)  # fmt: skip
            if not outcome.success:
                status = max(status, 1)
    return status


def _probe_target(
    target: TargetConfig, profile: str, overrides: dict[str, str], node: str | None
) -> ProbeTarget:
    return ProbeTarget(
        storageclass=target.name,
        directory=target.directory,
        profile=profile,
        node=node if target.node_local else None,
        overrides=overrides,
        volume=target.volume,
        timeout_seconds=target.timeout_seconds,
    )


def _state_path(target: TargetConfig, probe: ProbeTarget) -> Path:
    """State lives on the probe volume itself by default, so it persists with it."""
    base = target.state_dir or (target.directory / STATE_SUBDIR)
    return base / _slug(probe.grouping_key)


def _slug(key: dict[str, str], prefix: str = "") -> str:
    name = "_".join(f"{k}-{v}" for k, v in key.items())
    return prefix + re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".json"
