"""`fioprobe continuous`: one writer child per target, and /metrics for Prometheus to scrape.

The serving process never touches a probed volume. Each target's writer
(`fioprobe.continuous.writer`) is a child process whose events a reader thread applies to
the target's `StreamState`; the HTTP server answers from those states. So a write stuck in
the kernel blocks one child (and the thread that reads its pipe), never `/metrics`, the
other targets or shutdown:
- a writer that exits on its own is restarted after a backoff, its exit counted as an error;
- SIGTERM/SIGINT/SIGHUP: every writer is asked to stop (it removes its file), those still
  there after `STOP_GRACE_SECONDS` get SIGKILL (which a task in uninterruptible sleep only
  takes when its kernel call returns) and are abandoned, each written down in a marker of
  the per-user state directory (`probe.stuck`); the process exits 0;
- a stream that starts while the writer a previous one abandoned is still there starts no
  writer behind it (that one would hang in the same place, and one more at every restart):
  it says so, shows the old writer's operation as outstanding since it was left behind,
  and starts its own once that process has ended.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fioprobe.continuous import protocol
from fioprobe.continuous.collector import StreamCollector, StreamTarget
from fioprobe.continuous.device import block_device
from fioprobe.continuous.http import MetricsServer
from fioprobe.continuous.state import StreamState
from fioprobe.errors import FailureReason, UsageError
from fioprobe.target.childproc import python_command
from fioprobe.target.stuck import Marker, StateError, Stuck
from fioprobe.thresholds import STREAM_STALL_THRESHOLD_SECONDS

#: How long stopping writers may take before the rest are killed and abandoned: the whole
#: process is meant to exit within 2 s of SIGTERM.
STOP_GRACE_SECONDS = 1.0
#: How often the main loop looks at its writers (restarts, hang log lines).
SUPERVISE_SECONDS = 0.2
#: A writer that exited is started again after this long, doubling up to the maximum.
RESTART_BACKOFF_SECONDS = 1.0
RESTART_BACKOFF_MAX_SECONDS = 30.0
#: An operation outstanding this long is said in the log once (the metric shows it anyway).
HANG_LOG_SECONDS = 10.0
#: A stuck writer's marker lives in the per-user state directory, often on the node's root
#: disk, which may be the disk that hangs: each read or write of it gets this long, on a
#: thread of its own, so it never holds the main loop or shutdown.
MARKER_IO_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class WriterSettings:
    interval_seconds: float = 1.0
    write_size: int = 2300
    file_size: int = 4 * 1024 * 1024
    stall_threshold_seconds: float = STREAM_STALL_THRESHOLD_SECONDS


def say(message: str) -> None:
    print(f"fioprobe: continuous: {message}", file=sys.stderr, flush=True)


@dataclass(slots=True)
class Writer:
    """One target's writer child and the thread that reads its events."""

    target: StreamTarget
    settings: WriterSettings
    process: subprocess.Popen[str] | None = None
    restart_at: float = 0.0
    backoff: float = RESTART_BACKOFF_SECONDS
    hang_logged: bool = False
    reader: threading.Thread | None = field(default=None)
    #: The writer a previous stream left stuck on this target's disk, while it is there.
    held_by: Stuck | None = None
    marker_read: bool = False

    def marker(self) -> Marker:
        return Marker.for_directory(Path(self.target.directory), None, prefix="stuck-writer-")

    def start(self) -> None:
        s = self.settings
        self.process = subprocess.Popen(
            # The stream's own interpreter, isolated: the child runs fioprobe's code only.
            python_command(
                "from fioprobe.continuous.writer import main; sys.exit(main(sys.argv[2:]))",
                "--dir",
                self.target.directory,
                "--interval",
                repr(s.interval_seconds),
                "--write-size",
                str(s.write_size),
                "--file-size",
                str(s.file_size),
                *(("--etcd-data-dir", etcd) if (etcd := self.target.etcd_data_dir) else ()),
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # A pipe of the stream's own, forwarded by a thread: a writer left stuck in the
            # kernel then holds no descriptor of the stream's stderr (which a shell, `tee` or
            # a log collector would wait on until the disk answered).
            stderr=subprocess.PIPE,
            # A path with bytes that are not UTF-8 must not end the reader (and freeze the
            # stream's metrics): such bytes are shown replaced.
            encoding="utf-8",
            errors="replace",
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
            close_fds=True,
            # Its own process group: a Ctrl-C in a terminal reaches the parent, which stops
            # the writers itself (in order, with their clean-up).
            start_new_session=True,
        )
        stdout, stderr = self.process.stdout, self.process.stderr
        assert stdout is not None and stderr is not None
        self.reader = threading.Thread(
            target=self._read, args=(stdout,), name=f"writer {self.target.name}", daemon=True
        )
        self.reader.start()
        threading.Thread(
            target=_forward, args=(stderr,), name=f"writer {self.target.name} stderr",
            daemon=True,
        ).start()  # fmt: skip

    def _read(self, stdout: IO[str]) -> None:
        state = self.target.state
        for line in stdout:
            event = protocol.parse(line)
            if event is None:
                continue
            if event.kind == protocol.READY:
                self.backoff = RESTART_BACKOFF_SECONDS  # it works again: restarts start quick
                say(f"{self.target.name}: writing {self.settings.write_size} bytes + fdatasync "
                    f"every {self.settings.interval_seconds:g} s in {event.message} "
                    f"({event.size} bytes on disk)")  # fmt: skip
            state.apply(event)

    def supervise(self, now: float) -> None:
        process = self.process
        if process is None:
            if now >= self.restart_at and not self._held():
                try:
                    self.start()
                except OSError as exc:  # no process could be made (a pids limit, memory)
                    self._gone(now, FailureReason.IO_ERROR, f"cannot start it: {exc.strerror}")
            return
        code = process.poll()
        if code is None:
            inflight = self.target.state.inflight_seconds()
            if inflight >= HANG_LOG_SECONDS and not self.hang_logged:
                say(f"{self.target.name}: an operation has been outstanding {inflight:.0f} s "
                    "(the disk does not answer; the in-flight gauge shows it)")  # fmt: skip
                self.hang_logged = True
            elif inflight < HANG_LOG_SECONDS:
                self.hang_logged = False
            return
        if self.reader is not None:
            self.reader.join(timeout=0.5)  # the last events before the exit come first
        if code < 0:
            self._gone(now, FailureReason.INTERRUPTED, f"it was killed by signal {-code}")
        else:
            self._gone(now, FailureReason.IO_ERROR, f"it exited with status {code}")

    def _held(self) -> bool:
        """Whether a writer a previous stream abandoned is still stuck on this disk."""
        name = self.target.name
        if not self.marker_read:
            self.marker_read = True
            # No marker known (none, or no usable state directory): nothing to wait for.
            done, stuck = _bounded(self.marker().read)
            if not done or not isinstance(stuck, Stuck):
                return False
            if not stuck.still_there():
                self._forget_stuck(f"the writer a previous stream left ({stuck.describe()}) "
                                   "has ended")  # fmt: skip
                return False
            self.held_by = stuck
            self.target.state.held_since(time.time() - stuck.abandoned_at)
            say(f"{name}: the writer a previous stream left ({stuck.describe()}) is still "
                "stuck in the kernel; no writer starts behind it until it ends")  # fmt: skip
            return True
        if self.held_by is None:
            return False
        if self.held_by.still_there():
            return True
        stuck, self.held_by = self.held_by, None
        self.target.state.held_no_more()
        self._forget_stuck(f"the stuck writer ({stuck.describe()}) has ended; starting one")
        return False

    def _forget_stuck(self, message: str) -> None:
        done, problem = _bounded(self.marker().clear)
        if not done or isinstance(problem, Exception):
            message += f" (its marker stays: {problem or 'the state directory did not answer'})"
        say(f"{self.target.name}: {message}")

    def record_stuck(self, pid: int) -> str:
        """Write down an abandoned writer; what to add to the line that says so."""
        done, problem = _bounded(lambda: self.marker().record(pid, "writing"))
        if not done:
            return (
                f" (not written down: the state directory did not answer in {MARKER_IO_SECONDS:g}s)"
            )
        if isinstance(problem, Exception):
            return f" (not written down: {problem})"
        return ""

    def _gone(self, now: float, reason: FailureReason, what: str) -> None:
        """No writer runs: counted as an error, started again after the backoff."""
        self.target.state.writer_gone(reason.value, f"the writer process: {what}")
        self.process = None
        self.restart_at = now + self.backoff
        self.backoff = min(self.backoff * 2, RESTART_BACKOFF_MAX_SECONDS)

    def ask_to_stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()

    def kill_if_running(self) -> bool:
        """SIGKILL a writer that is still there; True if it had to be abandoned."""
        process = self.process
        if process is None or process.poll() is not None:
            return False
        try:
            process.kill()
        except ProcessLookupError:
            return False
        try:
            process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            return True
        return False


def _bounded(call: Callable[[], object]) -> tuple[bool, object]:
    """`call()` on a daemon thread, waited for MARKER_IO_SECONDS: (False, None) when it did
    not return in time (it is left to finish or hang alone), else (True, its result or the
    StateError it raised)."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except StateError as exc:
            result.append(exc)

    thread = threading.Thread(target=run, name="stuck-writer marker", daemon=True)
    thread.start()
    thread.join(MARKER_IO_SECONDS)
    return (True, result[0]) if result else (False, None)


def _forward(stderr: IO[str]) -> None:
    """A writer's own complaints (a traceback), onto the stream's stderr."""
    with contextlib.suppress(OSError, ValueError):
        for line in stderr:
            sys.stderr.write(line)
            sys.stderr.flush()


def _log_change(target_name: str) -> Callable[[str | None, str], None]:
    def log(reason: str | None, message: str) -> None:
        if reason is None:
            say(f"{target_name}: writing again")
        else:
            say(f"{target_name}: {reason}: {message} (repeats are counted in "
                "fioprobe_continuous_errors_total, not logged)")  # fmt: skip

    return log


def make_state(target_name: str, settings: WriterSettings) -> StreamState:
    return StreamState(
        stall_threshold_seconds=settings.stall_threshold_seconds,
        on_change=_log_change(target_name),
        resolve_device=block_device,
    )


def serve(
    targets: Sequence[StreamTarget],
    settings: WriterSettings,
    host: str,
    port: int,
) -> None:
    """Serve and write until SIGTERM, SIGINT or SIGHUP."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StreamCollector(targets))
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {
        s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }
    server = MetricsServer(lambda: generate_latest(registry), CONTENT_TYPE_LATEST)
    try:
        bound_port = server.listen(host, port)
    except OSError as exc:
        for s, handler in previous.items():
            signal.signal(s, handler)
        raise UsageError(f"continuous: cannot listen on {host}:{port}: {exc.strerror}") from None
    server.start()
    say(f"serving /metrics on http://{_show_host(host)}:{bound_port}/metrics for "
        f"{len(targets)} target(s)")  # fmt: skip
    writers = [Writer(target, settings) for target in targets]
    try:
        while not stop.is_set():
            now = time.monotonic()
            for writer in writers:
                writer.supervise(now)
            stop.wait(SUPERVISE_SECONDS)
    finally:
        _stop_writers(writers)
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        say(f"stopped by {signal.Signals(received[0]).name}")


def _stop_writers(writers: Sequence[Writer]) -> None:
    for writer in writers:
        writer.ask_to_stop()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        if all(w.process is None or w.process.poll() is not None for w in writers):
            return
        time.sleep(0.02)
    for writer in writers:
        process = writer.process
        if writer.kill_if_running() and process is not None:
            noted = writer.record_stuck(process.pid)
            say(f"{writer.target.name}: the writer (pid {process.pid}) is stuck in the kernel "
                f"and is left behind{noted}; its file stays in {writer.target.directory}/"
                ".fioprobe-continuous until a stream starts after it has ended")  # fmt: skip


def _show_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
