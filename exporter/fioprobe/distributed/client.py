"""One `fio --client` invocation: a checked job file sent to every server, under a deadline.

fio's client runs as the probes' fio does (`fioprobe.fio.execute`): the fixed minimal
environment, no descriptor beyond stdin/stdout/stderr, its own process group. Its job file
and output live in a private directory of the command's own (0700, removed afterwards), the
only place on the client that anything is written besides the archive.

Stopping it: a SIGTERM or SIGINT to fio's client makes it tell every server to quit its
jobs (fio's own protocol), and then it exits; the process group is killed after a grace
period if it does not. The servers' files are left for the clean-up job (`jobs.cleanup_job`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fioprobe.distributed.servers import Server
from fioprobe.errors import FailureReason, ProbeFailure
from fioprobe.fio.execute import FIO_ENVIRONMENT, first_line, kill_group

JOB_FILE = "phase.fio"
OUTPUT_FILE = "output.txt"
#: How long fio's client may take to stop its servers after a SIGTERM before its process
#: group is killed (the servers then end their jobs when the connection drops).
STOP_GRACE_SECONDS = 10.0
#: The most of fio's client output that is read. json+ of one phase is about 50 kB per server
#: (bins included); more than this is not fio's report, and reading it whole would let one
#: server's output exhaust the client's memory.
MAX_OUTPUT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ClientOutput:
    """What fio's client printed (the servers' text lines, then the JSON) and its status."""

    text: str
    returncode: int
    stderr: str


def run_client(
    fio: str,
    servers: Sequence[Server],
    job_text: str,
    deadline_seconds: float,
    output_format: str = "json+",
) -> ClientOutput:
    """Send `job_text` to every server and wait for fio's client, at most `deadline_seconds`.

    A timeout stops the client and raises ProbeFailure; any exception on the way (an
    interruption) stops it too before going on.
    """
    with tempfile.TemporaryDirectory(prefix="fioprobe-distributed-") as private:
        os.chmod(private, 0o700)
        job = Path(private) / JOB_FILE
        job.write_text(job_text)
        output = Path(private) / OUTPUT_FILE
        command = [fio, f"--output-format={output_format}"]
        for server in servers:
            command += [f"--client={server.fio_client}", str(job)]
        with output.open("wb") as stdout:
            try:
                process = subprocess.Popen(
                    command,
                    cwd=private,
                    env=FIO_ENVIRONMENT,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=subprocess.PIPE,
                    close_fds=True,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ProbeFailure(
                    FailureReason.FIO_MISSING, f"{fio}: cannot start: {exc}"
                ) from None
            try:
                _, stderr = process.communicate(timeout=deadline_seconds)
            except subprocess.TimeoutExpired:
                stop_client(process)
                raise ProbeFailure(
                    FailureReason.TIMEOUT,
                    f"fio's client did not finish within {deadline_seconds:g}s; stopped",
                ) from None
            except BaseException:
                stop_client(process)
                raise
        if output.stat().st_size > MAX_OUTPUT_BYTES:
            raise ProbeFailure(
                FailureReason.PARSE_ERROR,
                f"fio's client wrote more than {MAX_OUTPUT_BYTES} bytes; not read",
            )
        text = output.read_bytes().decode("utf-8", errors="replace")
    return ClientOutput(text, process.returncode, stderr.decode("utf-8", errors="replace"))


def stop_client(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM fio's client (it tells the servers to quit), then SIGKILL its group if it
    lingers.

    fio's client lingers when a server never answers its quit: it has had its SIGTERM, and
    another would only add the grace `kill_group` gives one (5 s) to the time to failure,
    so the group is killed at once; `kill_group` then waits until no member is left.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    until = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < until and process.poll() is None:
        time.sleep(0.05)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    kill_group(process)


def complaint(output: ClientOutput) -> str:
    """fio's first line of complaint, for a one-line failure message."""
    return first_line(output.stderr.strip())
