"""`fioprobe distributed` names what failed: the servers, the reason, in the error and the push.

The servers that fail a benchmark in the field are frozen ones (a stalled node, SIGSTOP) and
ports where something accepts connections and never answers: fio's client then waits until
fioprobe's deadline stops it and says nothing of which server held it up. Here each is real:
`fio --server` processes on 127.0.0.1 (one stopped with SIGSTOP, its whole process group),
a listening socket that accepts and never answers, a port nobody listens on, and a real
Pushgateway. Every process is started here, stopped by PID and checked gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, wait_for
from fioprobe.distributed.benchmark import CLEANUP_SECONDS
from fioprobe.distributed.client import STOP_GRACE_SECONDS, run_client
from fioprobe.distributed.jobs import PHASE_SLACK_SECONDS, phase_jobs
from fioprobe.distributed.plan import parse_plan
from fioprobe.distributed.servers import parse_servers
from fioprobe.errors import FailureReason, ProbeFailure
from support import services
from support.fioservers import FioServer, fio_clients, fio_servers

PREPARE_RUNTIME = 2
PLAN = f"""\
name: failing
storageclass: local-disk
servers: 3
jobs_per_server: 2
file_size: 1m
prepare_runtime: {PREPARE_RUNTIME}
phases: [prepare]
budget:
  bytes_per_server: 64m
  seconds_per_server: 60
"""
#: Starting the interpreter, pushing, on a loaded machine: beyond the documented deadlines.
MARGIN_SECONDS = 10.0
SILENT = "connected, no answer to fio's probe within 5s"


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A port on 127.0.0.1 whose listener accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, name="silent listener", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


@contextlib.contextmanager
def closing_listener() -> Iterator[int]:
    """A port whose listener closes every connection at once (as a fio of another protocol
    version does with fio's probe)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                listener.accept()[0].close()

    thread = threading.Thread(target=accept, name="closing listener", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


@contextlib.contextmanager
def frozen(server: FioServer) -> Iterator[None]:
    """The server and every process of its group stopped (SIGSTOP), resumed afterwards so
    that it can be stopped by PID as usual."""
    os.killpg(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(server.process.pid, signal.SIGCONT)


def _pushed_failure(pushgateway: services.Service) -> tuple[str, dict[str, float]]:
    """The failed benchmark's pushed reason, and each server's success by its label."""
    group = gateway_group(pushgateway, benchmark="failing", storageclass="local-disk")
    assert group is not None
    (reason,) = group["fioprobe_distributed_failure_reason_info"]
    servers = group["fioprobe_distributed_server_success"]
    return reason["labels"]["reason"], {m["labels"]["server"]: float(m["value"]) for m in servers}


def test_the_check_tells_answering_servers_from_silent_ones(tmp_path: Path) -> None:
    """A running fio server answers fio's probe; a frozen one and a silent listener accept
    the connection and do not, within the check's time; a closed port refuses at once; a
    listener that closes the connection has answered (nobody waits on it)."""
    from fioprobe.distributed.liveness import CHECK_SECONDS, unanswered

    with (
        fio_servers(tmp_path, 2) as (live, stopped),
        silent_listener() as silent,
        closing_listener() as closing,
    ):
        absent = services.free_port()
        names = [live.address, stopped.address, f"127.0.0.1:{silent}", f"127.0.0.1:{absent}"]
        servers = parse_servers(",".join([*names, f"127.0.0.1:{closing}"]))
        with frozen(stopped):
            started = time.monotonic()
            answers = unanswered(servers)
            took = time.monotonic() - started
        assert {s.name: a.why for s, a in answers.items()} == {
            stopped.address: SILENT,
            f"127.0.0.1:{silent}": SILENT,
            f"127.0.0.1:{absent}": "refused the connection",
        }
        assert [s.name for s, a in answers.items() if a.timed_out] == names[1:3]
        assert CHECK_SECONDS <= took < CHECK_SECONDS + MARGIN_SECONDS
        assert live.files() == [] and stopped.files() == []  # the probe sends no job
        assert unanswered(servers[1:2]) == {}  # resumed, it answers


def test_a_frozen_and_a_silent_server_are_named_pushed_and_waited_on_once(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    """One server frozen, one port that accepts and never answers, one server working:
    the error and the push name both bad servers and the reason, the clean-up is not sent to
    them (it would wait on them again), so the benchmark fails within the phase's deadline
    plus the clean-up's; the working server's files are removed, no fio client is left."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    with fio_servers(tmp_path / "servers", 2) as (live, stopped), silent_listener() as port:
        silent = f"127.0.0.1:{port}"
        order = [live.address, stopped.address, silent]
        with frozen(stopped):
            started = time.monotonic()
            done = fioprobe(
                "distributed", "--plan", str(plan), "--servers", ",".join(order),
                "-o", str(tmp_path / "archive"), "--gateway", pushgateway.url,
                timeout=300,
            )  # fmt: skip
            took = time.monotonic() - started
        stdout, stderr = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 1, stderr + stdout
        assert "Traceback" not in stderr
        # fio's client either waits on the two until its deadline stops it, or gives up on
        # them itself (no result): either way the check names both, and why.
        assert re.fullmatch(
            r"fioprobe: error: phase prepare: (fio's client did not finish within "
            rf"{PREPARE_RUNTIME + PHASE_SLACK_SECONDS:g}s; stopped|no result from "
            rf"{re.escape(stopped.address)}, {re.escape(silent)}.*); no answer from "
            rf"{re.escape(stopped.address)} \({SILENT}\), {re.escape(silent)} \({SILENT}\)\n",
            stderr,
        ), stderr
        assert (
            f"clean-up: the benchmark's files removed on 1 of 3 servers; no answer from "
            f"{stopped.address}, {silent}: their working directories may still hold bench.* "
            "files"
        ) in stdout
        deadline = PREPARE_RUNTIME + PHASE_SLACK_SECONDS + STOP_GRACE_SECONDS + CLEANUP_SECONDS
        assert took < deadline + MARGIN_SECONDS, f"{took:.0f}s: {stdout}"

        group = gateway_group(pushgateway, benchmark="failing", storageclass="local-disk")
        assert group is not None
        assert float(group["fioprobe_distributed_success"][0]["value"]) == 0
        (reason,) = group["fioprobe_distributed_failure_reason_info"]
        assert reason["labels"]["reason"] == "timeout"
        assert {
            m["labels"]["server"]: float(m["value"])
            for m in group["fioprobe_distributed_server_success"]
        } == {live.address: 1.0, stopped.address: 0.0, silent: 0.0}

        assert live.files() == [] and stopped.files() == []
        wait_for(lambda: not live.children(), timeout=15, what="server jobs to end")
        assert fio_clients([live.port, stopped.port, port]) == []


def test_a_server_that_refuses_is_pushed_with_its_reason(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    """A port with no listener: fio's client reports no result for it; the push says
    `fio_error` and names it, the others stay 1."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 2"))
    absent = f"127.0.0.1:{services.free_port()}"
    with fio_servers(tmp_path / "servers", 1) as (live,):
        done = fioprobe(
            "distributed", "--plan", str(plan), "--servers", f"{live.address},{absent}",
            "-o", str(tmp_path / "archive"), "--gateway", pushgateway.url,
        )  # fmt: skip
        stderr = done.stderr.decode()
        assert done.returncode == 1, stderr
        assert stderr == (
            f"fioprobe: error: phase prepare: no result from {absent}; fio said: fio: connect: "
            f"Connection refused; no answer from {absent} (refused the connection)\n"
        )
        assert live.files() == []
    assert _pushed_failure(pushgateway) == ("fio_error", {live.address: 1.0, absent: 0.0})


def test_servers_that_never_listen_are_pushed_by_name(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    """--wait-for-servers past its time: nothing was sent, and the push names the server
    that never listened."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 2"))
    absent = f"127.0.0.1:{services.free_port()}"
    with fio_servers(tmp_path / "servers", 1) as (live,):
        done = fioprobe(
            "distributed", "--plan", str(plan), "--servers", f"{live.address},{absent}",
            "-o", str(tmp_path / "archive"), "--gateway", pushgateway.url,
            "--wait-for-servers", "2",
        )  # fmt: skip
        assert done.returncode == 1, done.stderr.decode()
    assert _pushed_failure(pushgateway) == ("timeout", {live.address: 1.0, absent: 0.0})


def test_a_successful_benchmark_pushes_every_server_as_successful(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 2"))
    with fio_servers(tmp_path / "servers", 2) as started:
        done = fioprobe(
            "distributed", "--plan", str(plan), "-o", str(tmp_path / "archive"),
            "--servers", ",".join(s.address for s in started), "--gateway", pushgateway.url,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    group = gateway_group(pushgateway, benchmark="failing", storageclass="local-disk")
    assert group is not None
    assert "fioprobe_distributed_failure_reason_info" not in group
    assert {
        m["labels"]["server"]: float(m["value"])
        for m in group["fioprobe_distributed_server_success"]
    } == {s.address: 1.0 for s in started}


def test_a_client_held_up_by_silent_servers_is_killed_after_one_grace(tmp_path: Path) -> None:
    """fio's client waiting on servers that never answer does not end on its SIGTERM: its
    group is killed once the grace is over, not after a second grace."""
    job = phase_jobs(parse_plan(PLAN.replace("servers: 3", "servers: 2"), "plan.yaml"))[0]
    with fio_servers(tmp_path, 1) as (stopped,), silent_listener() as port:
        servers = parse_servers(f"{stopped.address},127.0.0.1:{port}")
        with frozen(stopped):
            started = time.monotonic()
            with pytest.raises(ProbeFailure) as caught:
                run_client("fio", servers, job.text, deadline_seconds=1)
            took = time.monotonic() - started
        assert caught.value.reason is FailureReason.TIMEOUT
        assert took < 1 + STOP_GRACE_SECONDS + 3, f"{took:.1f}s"
        assert fio_clients([stopped.port, port]) == []
