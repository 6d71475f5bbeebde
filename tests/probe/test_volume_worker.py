"""The volume worker: the child that does a probe's work on its volume.

Its errors come back as the same kinds of error the caller handles; a prober killed from
outside takes its child along (no child left to push later); the child never holds the
prober's stderr, so a child left behind does not keep a shell or a log reader waiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import gateway_group, wait_for
from fioprobe.errors import FailureReason, FioprobeError, Interrupted, ProbeFailure
from fioprobe.gateway.transport import PushError
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.probe import volume_worker
from fioprobe.publish.outcome import StateNotKept, WriterConflict
from fioprobe.publish.statefile import StateError
from support import services

OUTCOME = ProbeOutcome(run=None, success=False, duration_seconds=1.0, failure_reason="timeout")


@pytest.mark.parametrize(
    "error",
    [
        PushError("the gateway said 503"),
        StateNotKept("state gone", FailureReason.READ_ONLY, pushed=True),
        WriterConflict("owned by w-2", OUTCOME),
        StateError("corrupt", FailureReason.STATE_ERROR),
        ProbeFailure(FailureReason.NO_SPACE, "full"),
        Interrupted(signal.SIGTERM, "SIGTERM", "fio stopped"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_cross_the_pipe_as_the_same_kind(error: FioprobeError) -> None:
    again = volume_worker._rebuilt(volume_worker._envelope(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert again.reason == error.reason
    assert again.exit_code == error.exit_code
    for attribute in ("pushed", "outcome", "signum", "what_happened"):
        assert getattr(again, attribute, None) == getattr(error, attribute, None)


def test_an_unknown_call_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown worker call"):
        volume_worker.start("rm -rf", "/")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _long_probe(
    tmp_path: Path, pushgateway: services.Service, storageclass: str, stderr: int
) -> subprocess.Popen[bytes]:
    """`fioprobe probe` of a 20-second, 10-IOPS write profile: long enough to kill its parts."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "long.fio").write_text(
        "# fioprobe-budget-bytes: 1048576\n# fioprobe-budget-seconds: 30\n"
        "[long]\nioengine=sync\nrw=write\nbs=4k\nsize=1m\ntime_based=1\nruntime=20\n"
        "rate_iops=10\n"
    )
    target = tmp_path / "probe"
    target.mkdir()
    env = {**os.environ, "FIOPROBE_STATE_DIR": str(tmp_path / "state")}
    return subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "probe", "--profile", "long", "--jobs-dir", str(jobs),
         "--dir", str(target), "--gateway", pushgateway.url, "--storageclass", storageclass],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
    )  # fmt: skip


def _wait_for_worker_and_fio(
    prober: subprocess.Popen[bytes], worker: list[int], fio: list[int]
) -> None:
    """Fill `worker` with the prober's volume worker and `fio` with that worker's children
    (the caller's lists, so its clean-up sees what was found even after a timeout)."""
    wait_for(lambda: worker.extend(p for p in _children(prober.pid)
                                   if "volume_worker" in _cmdline(p)) or worker,
             timeout=30, what="the volume worker to start")  # fmt: skip
    wait_for(lambda: fio.extend(_children(worker[0])) or fio, timeout=30,
             what="fio to start")  # fmt: skip


def test_a_prober_killed_from_outside_takes_its_child_along(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    prober = _long_probe(tmp_path, pushgateway, "killed", subprocess.DEVNULL)
    worker: list[int] = []
    fio: list[int] = []
    try:
        _wait_for_worker_and_fio(prober, worker, fio)
        prober.kill()
        prober.wait(timeout=30)
        deadline = time.monotonic() + 10
        while "volume_worker" in _cmdline(worker[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "volume_worker" not in _cmdline(worker[0]), "the child outlived its prober"
    finally:
        if prober.poll() is None:
            prober.kill()
            prober.wait(timeout=30)
        for pid in fio:  # fio, orphaned like a SIGKILLed prober's always was, ends here
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_a_worker_killed_from_outside_takes_fio_along_and_its_failure_is_pushed(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    """The OOM killer's SIGKILL on the volume worker (not on the prober): fio, in a session of
    its own, is killed with it (it would go on writing in a directory the next run removes),
    and the prober pushes the run as failed, naming the worker, within seconds, not at the
    profile's timeout."""
    prober = _long_probe(tmp_path, pushgateway, "oom", subprocess.PIPE)
    worker: list[int] = []
    fio: list[int] = []
    try:
        _wait_for_worker_and_fio(prober, worker, fio)
        time.sleep(1.0)  # fio's process group is reported to the prober once fio runs
        killed_at = time.monotonic()
        os.kill(worker[0], signal.SIGKILL)
        _, stderr = prober.communicate(timeout=60)
        took = time.monotonic() - killed_at
        assert prober.returncode == 1, stderr.decode()
        assert took < 15, f"the prober took {took:.1f} s after its worker died"
        wait_for(lambda: all(not _cmdline(pid) for pid in fio), timeout=10,
                 what="fio to end with its worker")  # fmt: skip
        group = gateway_group(pushgateway, storageclass="oom", profile="long")
        assert group is not None
        assert group["fioprobe_success"][0]["value"] == "0"
        (info,) = group["fioprobe_failure_reason_info"]
        assert info["labels"]["reason"] == FailureReason.FIO_ERROR.value
        assert "ended without a result" in stderr.decode(), stderr.decode()
    finally:
        if prober.poll() is None:
            prober.kill()
            prober.wait(timeout=30)
        for pid in fio:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_the_pushed_duration_runs_to_the_push() -> None:
    """fioprobe_duration_seconds of a probe run covers its publish: it is taken when the
    push is made, from the run's start (the same clock in the prober and its children)."""
    from fioprobe.metrics.collector import registry_for

    started = time.monotonic() - 5.0  # the run began 5 s ago; its volume part took 1 s
    outcome = ProbeOutcome(run=None, success=True, duration_seconds=1.0,
                           started_monotonic=started)  # fmt: skip
    registry = registry_for(outcome, None)
    (family,) = [f for f in registry.collect() if f.name == "fioprobe_duration_seconds"]
    assert family.samples[0].value >= 5.0
    converted = ProbeOutcome(run=None, success=True, duration_seconds=1.0)
    (family,) = [f for f in registry_for(converted, None).collect()
                 if f.name == "fioprobe_duration_seconds"]  # fmt: skip
    assert family.samples[0].value == 1.0


def _catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (SigCgt of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) & (1 << (signum - 1)))


def test_a_stop_signal_while_the_child_reads_its_request_is_an_interruption(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """SIGTERM while the child is still reading its request (and importing the call's
    modules: a prober stopped right after it started its worker): the child answers with
    the interruption, as at any later moment, and prints no traceback."""
    from fioprobe.target.childproc import python_command

    process = subprocess.Popen(
        python_command(
            "from fioprobe.probe.volume_worker import child_main; sys.exit(child_main())",
            str(os.getpid()),
        ),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=volume_worker.CHILD_ENVIRONMENT, close_fds=True, start_new_session=True,
    )  # fmt: skip
    worker = volume_worker.Worker("volume", process)
    try:
        # Its handlers are in place and it waits for the request, which never comes.
        wait_for(lambda: _catches(process.pid, signal.SIGTERM), timeout=30,
                 what="the child's signal handlers")  # fmt: skip
        os.kill(process.pid, signal.SIGTERM)
        with pytest.raises(Interrupted) as caught:
            worker.wait(time.monotonic() + 30)
        assert caught.value.signum == signal.SIGTERM
        worker.close()
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
    assert "Traceback" not in capfd.readouterr().err
