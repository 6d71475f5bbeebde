"""Running fio itself: a checked job file, a minimal environment, a process group, a deadline.

fio gets nothing it does not need: its environment is a fixed PATH and locale (no
credentials, no proxy variables, nothing fio could expand), no descriptor beyond stdin,
stdout and stderr, and a job file written by fioprobe from a checked profile. It runs in
its own process group, killed as a whole on timeout or interruption. Its result is read
whole, and its own byte counts are checked against the profile's declared budget.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Protocol

from fioprobe.errors import ERRNO_REASONS, FailureReason, ProbeFailure
from fioprobe.fio.model import Run
from fioprobe.fio.parse import FioOutputError, parse_text
from fioprobe.fio.profiles import Profile

#: fio 3.1 is the oldest with *_ns latencies and json+ bins the model relies on.
MIN_FIO_VERSION = (3, 1)
#: The whole environment fio runs with.
FIO_ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                   "LC_ALL": "C"}  # fmt: skip
#: Words of fio's error messages (strerror of the job's errno) and the reason they mean.
_MESSAGE_REASONS = {os.strerror(number): reason for number, reason in ERRNO_REASONS.items()}
JOB_FILE = "probe.fio"
OUTPUT_FILE = "result.json"


class RunDir(Protocol):
    """The private directory fio runs in, as fio needs it. The probe opens, checks and
    removes it (`fioprobe.probe.directory.RunDir`); running fio only needs a path pinned to
    it and files written and read relative to it, so this layer does not import the probe's.
    """

    @property
    def pinned_path(self) -> str: ...

    def write_file(self, name: str, text: str) -> None: ...

    def read_file(self, name: str) -> bytes | None: ...


def fio_binary() -> str:
    found = shutil.which("fio")  # where the operator installed it; run with FIO_ENVIRONMENT
    if found is None:
        raise ProbeFailure(FailureReason.FIO_MISSING, "fio is not installed (apt-get install fio)")
    try:
        version = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=10, check=False,
            env=FIO_ENVIRONMENT,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeFailure(FailureReason.FIO_MISSING, f"{found} does not run: {exc}") from None
    check_fio_version(found, version)
    return found


def check_fio_version(binary: str, version: str) -> None:
    """Refuse fio older than MIN_FIO_VERSION: it lacks the *_ns fields and json+ bins."""
    match = re.search(r"fio-(\d+)\.(\d+)", version)
    if not match or (int(match.group(1)), int(match.group(2))) < MIN_FIO_VERSION:
        wanted = ".".join(map(str, MIN_FIO_VERSION))
        raise ProbeFailure(
            FailureReason.FIO_MISSING,
            f"{binary} reports {version!r:.60}; fioprobe needs fio {wanted} or newer",
        )


def run_fio(
    fio: str,
    profile: Profile,
    run_dir: RunDir,
    timeout: float,
    on_fio: Callable[[int | None], None] | None = None,
) -> Run:
    """Run the profile in `run_dir`; the parsed run, or a ProbeFailure saying why not.

    `on_fio` hears fio's process group when it starts and None once fio is gone (so that a
    supervisor that has to give up on this process can kill fio too, and never a group
    whose id was reused after fio ended).
    """
    directory = run_dir.pinned_path
    run_dir.write_file(JOB_FILE, profile.render(directory))
    command = [fio, "--output-format=json+", f"--output={directory}/{OUTPUT_FILE}",
               f"{directory}/{JOB_FILE}"]  # fmt: skip
    try:
        process = subprocess.Popen(
            command,
            cwd="/",
            env=FIO_ENVIRONMENT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # its own process group: killed as a whole
        )
    except OSError as exc:
        raise ProbeFailure(FailureReason.FIO_MISSING, f"{fio}: cannot start: {exc}") from None
    if on_fio is not None:
        on_fio(process.pid)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        raise ProbeFailure(
            FailureReason.TIMEOUT, f"fio did not finish within {timeout:g}s; stopped"
        ) from None
    except BaseException:  # Interrupted, anything: fio must not outlive us
        kill_group(process)
        raise
    finally:
        if on_fio is not None and process.returncode is not None:
            on_fio(None)
    complaint = stderr.decode("utf-8", errors="replace").strip()
    raw = run_dir.read_file(OUTPUT_FILE)
    try:
        if raw is None:
            raise FioOutputError(OUTPUT_FILE, "fio wrote no output")
        run = parse_text(raw.decode("utf-8", errors="replace"), source="fio output")
    except FioOutputError as exc:
        if process.returncode != 0 or raw is None:
            raise ProbeFailure(
                _reason_in(complaint) or FailureReason.FIO_ERROR,
                f"fio exited {process.returncode}: {first_line(complaint)}",
            ) from None
        raise ProbeFailure(FailureReason.PARSE_ERROR, str(exc)) from None
    if process.returncode != 0 or run.failed_jobs:
        errors = ", ".join(
            f"{job.name}: error {job.error} ({_strerror(job.error)})" for job in run.failed_jobs
        )
        reasons = [ERRNO_REASONS.get(job.error) for job in run.failed_jobs]
        reason = next((r for r in reasons if r), None) or _reason_in(complaint)
        raise ProbeFailure(
            reason or FailureReason.FIO_ERROR,
            f"fio exited {process.returncode}: {errors or first_line(complaint)}",
        )
    check_budget(profile, run)
    return run


def check_budget(profile: Profile, run: Run) -> None:
    """fio's own byte counts against the declared budget: more is a failure, never data."""
    done = sum(stats.io_bytes for job in run.jobs for stats in job.ops.values()
               if stats.op in ("read", "write", "trim"))  # fmt: skip
    if done > profile.budget_bytes:
        raise ProbeFailure(
            FailureReason.BUDGET_EXCEEDED,
            f"{profile.name}: fio reports {done} bytes of IO, more than the declared budget "
            f"of {profile.budget_bytes}; the run is not counted",
        )


def _reason_in(complaint: str) -> FailureReason | None:
    for message, reason in _MESSAGE_REASONS.items():
        if message in complaint:
            return reason
    return None


def _strerror(number: int) -> str:
    try:
        return os.strerror(number)
    except ValueError:
        return "unknown"


def kill_group(process: subprocess.Popen[bytes]) -> None:
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
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


#: Fields of /proc/<pid>/stat after the command's closing parenthesis (the command may hold
#: spaces and parentheses): 0 the state, 1 the parent's PID, 2 the process group.
STAT_PARENT = 1
STAT_GROUP = 2


def live_processes(field: int, value: int) -> list[int]:
    """Live (non-zombie) processes whose /proc stat `field` is `value`: the members of a
    process group (STAT_GROUP) or the children of a process (STAT_PARENT)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[field]) == value and fields[0] != b"Z":
            found.append(int(entry.name))
    return found


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    return live_processes(STAT_GROUP, pgid)


def first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else "(no message)"
