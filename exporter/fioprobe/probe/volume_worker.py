"""Work on a probed volume, done in a child process that the prober can abandon.

A disk that stops answering leaves the process that asked in uninterruptible sleep: no
signal ends it, not even SIGKILL, until the kernel call returns (a hung Ceph volume kept one
for 400 s). Only a whole process can be left behind in that state; a thread cannot (its
process never exits while one of its threads is stuck in the kernel). So the process that
pushes never touches a probed volume itself: each piece of work there is one call in a fresh
child (`python -I`, its own session), which says how far it got and returns its result over
a pipe. The parent waits for it with a deadline. When the deadline passes, it kills the
child's process group and fio's, and stops waiting: a child that cannot be reaped is left to
the kernel (reaped later without blocking) and the caller reports `timeout`.

The child dies with its parent (PR_SET_PDEATHSIG): a prober killed from outside leaves no
child that would go on and push later.

Only the calls listed in `CALLS` can be made (the publish call runs the publish function its
caller hands it, pickled by reference: a module-level function of this same fioprobe, which
the child imports to run it); arguments and results cross as pickles between two processes
of this same fioprobe (the child never reads anything else from the parent).
Errors cross as a small envelope and are raised again in the parent as the same kind of
`FioprobeError`, so the caller handles them as if the call had been made in-process.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import importlib
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from fioprobe.errors import ExitCode, FailureReason, FioprobeError, Interrupted, ProbeFailure
from fioprobe.target.childproc import python_command

#: The calls a child can make: name -> "module:function" inside the fioprobe package.
CALLS = {
    "volume": "fioprobe.probe.volume_part:run_on_volume",
    "publish": "fioprobe.probe.volume_part:publish_on_volume",
}
#: Longest a killed child is waited for before it is left behind (a child that is not stuck
#: in the kernel goes at once; one that is stuck would hold the parent for good).
REAP_SECONDS = 0.5
#: Environment of the child: nothing of the parent's (credentials come in the pickle).
CHILD_ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "LC_ALL": "C.UTF-8"}  # fmt: skip
_PROGRESS = b"P "
_REPLY = b"R "
_PR_SET_PDEATHSIG = 1

#: What a call in the child uses to say how far it got: `report(phase, fio_pgid=...)`.
Report = Callable[..., None]


class Expired(FioprobeError):
    """The deadline passed before the child answered (the caller reports `timeout`)."""

    exit_code = ExitCode.PROBE_FAILED
    reason = FailureReason.TIMEOUT

    def __init__(self) -> None:
        super().__init__("the worker did not answer within its deadline")


class WorkerDied(ProbeFailure):
    """The child ended without a reply (killed from outside, out of memory, a crash)."""


@dataclass(slots=True)
class Worker:
    """One call running in a child process (see the module docstring)."""

    call: str
    process: subprocess.Popen[bytes]
    #: What the child last said it was doing (for messages about where it got stuck).
    phase: str = "starting"
    #: fio's process group, once the child started fio (killed with the child).
    fio_pgid: int | None = None
    _buffer: bytes = b""
    _reply: tuple[str, Any] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, deadline: float) -> Any:
        """The call's result, or its error raised again; `Expired` once `deadline` (a
        time.monotonic() value) passes. A signal handler's exception goes through."""
        stdout, stderr = self.process.stdout, self.process.stderr
        assert stdout is not None and stderr is not None
        streams = {stdout.fileno(): self._take, stderr.fileno(): _forward}
        while self._reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Expired()
            ready, _, _ = select.select(list(streams), [], [], min(remaining, 1.0))
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    streams[fd](chunk)
                elif fd == stdout.fileno():
                    return self._ended_without_reply(deadline)
                else:
                    del streams[fd]  # the child closed its stderr: only stdout is left
        kind, value = self._reply
        if kind == "ok":
            return value
        raise _rebuilt(value)

    def _take(self, chunk: bytes) -> None:
        self._buffer += chunk
        while b"\n" in self._buffer and self._reply is None:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if line.startswith(_PROGRESS):
                with contextlib.suppress(ValueError, TypeError):
                    progress = json.loads(line[len(_PROGRESS) :])
                    self.phase = str(progress.get("phase", self.phase))[:200]
                    if "fio_pgid" in progress:  # None once fio ended: its id may be reused
                        pgid = progress["fio_pgid"]
                        self.fio_pgid = pgid if isinstance(pgid, int) and pgid > 1 else None
            elif line.startswith(_REPLY):
                self._reply = pickle.loads(base64.b64decode(line[len(_REPLY) :]))

    def _ended_without_reply(self, deadline: float) -> Any:
        # A worker that died (the OOM killer, a crash) leaves fio in its own session: stop it,
        # or it goes on writing in a directory the next run removes.
        if self.fio_pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.fio_pgid, signal.SIGKILL)
        self._drain_stderr(deadline)
        try:
            code = self.process.wait(
                timeout=max(0.0, min(REAP_SECONDS, deadline - time.monotonic()))
            )
        except subprocess.TimeoutExpired:
            code = None
        raise WorkerDied(
            FailureReason.FIO_ERROR,
            f"the {self.call} worker (pid {self.pid}) ended without a result "
            f"(exit status {code}) while {self.phase}",
        )

    def stop(self, grace: float) -> Any:
        """Ask the child to stop (SIGTERM: it stops fio and cleans up) and wait up to
        `grace` seconds for its answer; None if it gave none (it is then killed)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        try:
            value = self.wait(time.monotonic() + grace)
        except Expired:
            self.abandon()
            return None
        except FioprobeError as exc:
            value = exc
        self.close()
        return value

    def abandon(self) -> bool:
        """Kill the child's process group and fio's; True if the child could not be reaped
        (stuck in the kernel: it is left behind, never waited for again)."""
        for group in (self.pid, self.fio_pgid):
            if group is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
        try:
            self.process.wait(timeout=REAP_SECONDS)
            stuck = False
        except subprocess.TimeoutExpired:
            stuck = True  # subprocess reaps it later, without blocking, once it can
        self._close_pipes()
        return stuck

    def close(self) -> None:
        """After a reply: let the child exit, reap it (it has nothing left to do)."""
        self._drain_stderr(time.monotonic() + REAP_SECONDS * 4)
        self._close_pipes()
        try:
            self.process.wait(timeout=REAP_SECONDS * 4)
        except subprocess.TimeoutExpired:
            self.abandon()

    def _drain_stderr(self, deadline: float) -> None:
        """Forward what the child still says on stderr, until it closes it or `deadline`."""
        stderr = self.process.stderr
        if stderr is None or stderr.closed:
            return
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([stderr.fileno()], [], [], remaining)
            if not ready:
                return
            chunk = os.read(stderr.fileno(), 1 << 16)
            if not chunk:
                return
            _forward(chunk)

    def _close_pipes(self) -> None:
        # The parent's ends only: a child left behind holds nothing of the parent's (not its
        # stderr either, which a shell or a log collector would otherwise wait on).
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


def start(call: str, *args: object) -> Worker:
    """Start `CALLS[call](*args, report=...)` in a child; wait for it with `Worker.wait`."""
    if call not in CALLS:
        raise ValueError(f"unknown worker call {call!r}")
    request = pickle.dumps((call, args), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        process = subprocess.Popen(
            # The parent's own interpreter, isolated: the child runs fioprobe's code only.
            python_command(
                "from fioprobe.probe.volume_worker import child_main; sys.exit(child_main())",
                str(os.getpid()),
            ),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Its complaints go through the parent (`_forward`): a pipe of the parent's own,
            # so a child left behind keeps no descriptor of the parent's stderr open.
            stderr=subprocess.PIPE,
            env=CHILD_ENVIRONMENT,
            close_fds=True,
            cwd="/",
            # Its own process group and session: killed as a whole, and a Ctrl-C reaches
            # only the parent, which stops the child itself (with its clean-up).
            start_new_session=True,
        )
    except OSError as exc:
        raise ProbeFailure(
            FailureReason.FIO_ERROR, f"cannot start the {call} worker: {exc.strerror or exc}"
        ) from None
    stdin = process.stdin
    assert stdin is not None
    try:
        # The child reads this first; a request is small (a profile, a run's totals).
        stdin.write(request)
        stdin.close()
    except OSError:
        pass  # the child is gone already: wait() reports it
    return Worker(call, process)


def _forward(chunk: bytes) -> None:
    """What the child wrote on its stderr, onto this process's."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
        sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()


# --- the child ------------------------------------------------------------------------------


def child_main() -> int:
    """Entry point of the child: one call from stdin, its reply on stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr: stdout carries only the protocol
    _die_with_parent(int(sys.argv[2]))

    def report(phase: str, **info: object) -> None:
        _send(out, _PROGRESS + json.dumps({"phase": phase, **info}).encode())

    worker = "worker"
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _interrupt)
        # Reading the request imports the call's modules: a stop signal that arrives then is
        # an interruption like any other, answered as such rather than as a traceback.
        call, args = pickle.load(sys.stdin.buffer)
        worker = f"{call} worker"
        module_name, function_name = CALLS[call].split(":")
        function = getattr(importlib.import_module(module_name), function_name)
        reply: tuple[str, Any] = ("ok", function(*args, report=report))
    except FioprobeError as exc:
        reply = ("error", _envelope(exc))
    except Exception as exc:  # a bug: its traceback for the log, a failure for the run
        traceback.print_exc()
        failure = ProbeFailure(FailureReason.FIO_ERROR, f"the {worker} failed: {exc!r}")
        reply = ("error", _envelope(failure))
    # A signal from now on changes nothing: the answer is on its way.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    _send(out, _REPLY + base64.b64encode(pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)))
    return 0


def _send(out: IO[bytes], line: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):  # the parent stopped listening (it gave up)
        out.write(line + b"\n")
        out.flush()


def _interrupt(signum: int, _frame: object) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # one interruption, then the clean-up runs
    raise Interrupted(signum, signal.Signals(signum).name)


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the parent dies, and exit now if it died already."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


# --- errors across the pipe -----------------------------------------------------------------


def _envelope(exc: FioprobeError) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "reason": getattr(exc, "reason", None),
        "exit_code": int(exc.exit_code),
        "pushed": getattr(exc, "pushed", None),
        "outcome": getattr(exc, "outcome", None),
        "signum": getattr(exc, "signum", None),
        "what_happened": getattr(exc, "what_happened", None),
    }


def _rebuilt(envelope: dict[str, Any]) -> FioprobeError:
    """The child's error as the parent raises it: the same class for the ones callers
    handle apart, a FioprobeError with the same message, reason and exit status else."""
    from fioprobe.gateway.transport import PushError
    from fioprobe.publish.outcome import StateNotKept, WriterConflict
    from fioprobe.publish.statefile import StateError

    kind, message, reason = envelope["type"], envelope["message"], envelope["reason"]
    if kind == "PushError":
        return PushError(message)
    if kind == "StateNotKept":
        return StateNotKept(message, reason, pushed=bool(envelope["pushed"]))
    if kind == "WriterConflict":
        return WriterConflict(message, envelope["outcome"])
    if kind == "Interrupted":
        return Interrupted(envelope["signum"], message, envelope["what_happened"] or "")
    if kind == "ProbeFailure":
        return ProbeFailure(reason, message)
    error = StateError(message, reason) if kind == "StateError" else FioprobeError(message)
    error.reason = reason or error.reason
    error.exit_code = envelope["exit_code"]
    return error
