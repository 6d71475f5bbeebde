"""`fioprobe distributed` against three real `fio --server` processes on 127.0.0.1.

The acceptance of the feature: prepare, randread and randwrite sent to every server at once;
a row per server, the sum of the servers and fio's own "All clients" aggregate, each labelled
and each equal to what fio wrote; every phase archived where `report` reads it; the
benchmark pushed once to a real Pushgateway under its own group; and nothing left behind,
after success, after a failed phase and after SIGTERM: no file in any server's directory, no
job still running on a server, no fio client. The servers are started here on free ports,
stopped by PID and checked gone.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fioprobe, gateway_group, wait_for
from fioprobe.fio.clientserver import parse_client_server
from support import services
from support.fioservers import LOCALHOST6, FioServer, fio_clients, fio_servers, listening

PLAN = """\
name: accept
storageclass: local-disk
servers: 3
jobs_per_server: 2
file_size: 8m
block_size: 4k
iodepth: 4
runtime: 2
prepare_runtime: 20
budget:
  bytes_per_server: 128m
  seconds_per_server: 60
"""
PHASES = ("prepare", "randread", "randwrite")
OP = {"prepare": "write", "randread": "read", "randwrite": "write"}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[FioServer]]:
    with fio_servers(tmp_path / "servers", 3) as started:
        yield started
    for server in started:
        assert server.process.poll() is not None, "a fio server is still running"
        assert not os.path.exists(f"/proc/{server.process.pid}/cmdline") or _zombie(server)
        assert not listening(server.port)


def _has_ipv6_loopback() -> bool:
    with open("/proc/net/if_inet6") as handle:
        return any(line.split()[0] == "0" * 31 + "1" for line in handle)


def _zombie(server: FioServer) -> bool:
    with open(f"/proc/{server.process.pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def _clients_of(servers: list[FioServer]) -> list[str]:
    """Command lines of fio clients still talking to these servers."""
    return fio_clients([server.port for server in servers])


def _nothing_left(servers: list[FioServer]) -> None:
    for server in servers:
        assert server.files() == [], f"files left on {server.address}"
        wait_for(lambda s=server: not s.children(), timeout=15, what="server jobs to end")
    assert _clients_of(servers) == []


def _rows(stdout: str, phase: str) -> dict[str, list[str]]:
    """The table of one phase: row name -> its columns."""
    block = stdout.split(f"phase {phase} (")[1].split("\n\n")[0].splitlines()[2:]
    rows = {}
    for line in block:
        name, _, rest = line.strip().partition("  ")
        if name.startswith(("sum of servers", "all servers")):
            name = " ".join(line.split()[:3])
            rest = " ".join(line.split()[3:])
        rows[name.strip()] = rest.split()
    return rows


def test_three_servers_prepare_randread_randwrite(
    tmp_path: Path, servers: list[FioServer], pushgateway: services.Service
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    archive = tmp_path / "archive"
    done = fioprobe(
        "distributed", "--plan", str(plan), "--servers", ",".join(s.address for s in servers),
        "-o", str(archive), "--gateway", pushgateway.url,
    )  # fmt: skip
    stdout = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + stdout
    assert "clean-up: the benchmark's files removed on 3 servers" in stdout
    _nothing_left(servers)

    group = gateway_group(pushgateway, benchmark="accept", storageclass="local-disk")
    assert group is not None
    assert float(group["fioprobe_distributed_success"][0]["value"]) == 1
    assert float(group["fioprobe_distributed_servers"][0]["value"]) == 3
    for phase in PHASES:
        op = OP[phase]
        whole = archive / "accept_local-disk-fio-all-servers" / f"{phase}.json"
        result = parse_client_server(whole.read_text())
        assert result.aggregate is not None
        fio_aggregate = result.aggregate.jobs[0].ops[op]
        per_server = {s.server: s.run.jobs[0].ops[op] for s in result.servers}
        assert sorted(per_server) == sorted(s.address for s in servers)
        for server in servers:  # each server's own file, split from the one above
            own = archive / f"accept_local-disk-fio-127.0.0.1-{server.port}" / f"{phase}.json"
            assert json.loads(own.read_text())["jobs"][0]["port"] == server.port

        rows = _rows(stdout, phase)
        for address, stats in per_server.items():
            assert float(rows[address][0]) == pytest.approx(stats.iops, abs=0.05)
        summed = sum(stats.iops for stats in per_server.values())
        assert float(rows["sum of servers"][0]) == pytest.approx(summed, abs=0.05)
        assert float(rows["all servers (fio)"][0]) == pytest.approx(fio_aggregate.iops, abs=0.05)
        # fio's aggregate: every IO over the longest runtime, never the sum of the rates.
        longest = max(stats.runtime_s for stats in per_server.values())
        assert fio_aggregate.runtime_s == longest
        assert fio_aggregate.total_ios == sum(s.total_ios for s in per_server.values())
        assert fio_aggregate.iops <= summed + 0.5

        pushed = {
            m["labels"]["server"]: float(m["value"])
            for m in group[f"fioprobe_distributed_{op}_iops"]
            if m["labels"]["phase"] == phase
        }
        assert pushed == pytest.approx({a: s.iops for a, s in per_server.items()})
        (aggregate_metric,) = [
            m
            for m in group[f"fioprobe_distributed_aggregate_{op}_iops"]
            if m["labels"]["phase"] == phase
        ]
        assert float(aggregate_metric["value"]) == pytest.approx(fio_aggregate.iops)

    # The archive is what `report` reads: one column (the StorageClass), a node per server.
    report = fioprobe("report", str(archive), "-o", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr.decode()
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    nodes = {str(entry.get("node")) for entry in _objects(data, "node")}
    assert {f"127.0.0.1-{s.port}" for s in servers} | {"all-servers"} <= nodes
    # ... and what `backfill` reads: every phase of every folder.
    backfill = fioprobe("backfill", str(archive), "-o", str(tmp_path / "blocks"))
    assert backfill.returncode == 0, backfill.stderr.decode()
    assert "from 12 files" in backfill.stderr.decode()
    # Every series is the benchmark's (the mixin's probe selectors take benchmark="" only).
    samples = [
        line
        for line in (tmp_path / "blocks" / "fioprobe-backfill.om").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert samples and all('benchmark="accept"' in line for line in samples)
    # Without the benchmark's name (no <battery> in the folder pattern): still never a probe.
    nameless = fioprobe(
        "backfill", str(archive), "-o", str(tmp_path / "nameless"),
        "--folder-pattern", r"^[^_/]+_(?P<group>.+)-fio-(?P<node>[^/]+)$",
    )  # fmt: skip
    assert nameless.returncode == 0, nameless.stderr.decode()
    samples = [
        line
        for line in (tmp_path / "nameless" / "fioprobe-backfill.om").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert samples and all('benchmark="fio-client"' in line for line in samples)


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine's loopback has no ::1")
def test_ipv6_servers_are_matched_by_address_and_port(tmp_path: Path) -> None:
    """fio reports an IPv6 server's host without brackets (`::1`, port apart): every
    server is still found in the output, and the clean-up reaches each."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 2") + "phases: [prepare]\n")
    with fio_servers(tmp_path / "servers", 2, LOCALHOST6) as servers:
        done = fioprobe(
            "distributed", "--plan", str(plan), "-o", str(tmp_path / "archive"),
            "--servers", ",".join(s.address for s in servers),
        )  # fmt: skip
        stdout = done.stdout.decode()
        assert done.returncode == 0, done.stderr.decode() + stdout
        assert "clean-up: the benchmark's files removed on 2 servers" in stdout
        for server in servers:
            assert server.files() == []
            assert (tmp_path / "archive" / f"accept_local-disk-fio---1-{server.port}").is_dir()
            wait_for(lambda s=server: not s.children(), timeout=15, what="server jobs to end")
    assert not any(listening(s.port, LOCALHOST6) for s in servers)


def _objects(data: object, *keys: str) -> Iterator[dict[str, Any]]:
    """Every object of report.json (at any depth) that has all of `keys`."""
    if isinstance(data, dict):
        if set(keys) <= set(data):
            yield data
        for value in data.values():
            yield from _objects(value, *keys)
    elif isinstance(data, list):
        for value in data:
            yield from _objects(value, *keys)


def test_sigterm_stops_servers_removes_files_and_exits_143(
    tmp_path: Path, servers: list[FioServer]
) -> None:
    """SIGTERM in the middle of randread: fio's client tells the servers to quit, the
    clean-up removes their files, and the command ends 128 + 15 with one clear line."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        PLAN.replace("runtime: 2\n", "runtime: 30\nloops: 1000\n")
        .replace("128m", "64g")
        .replace("seconds_per_server: 60", "seconds_per_server: 120")
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "distributed", "--plan", str(plan),
         "--servers", ",".join(s.address for s in servers), "-o", str(tmp_path / "archive"),
         "--gateway", f"http://127.0.0.1:{services.free_port()}", "--attempts", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for raw in process.stdout:
        seen.append(raw.decode())
        if raw.startswith(b"phase randread: sending"):
            break
    else:
        pytest.fail(f"randread never started: {''.join(seen)}{process.stderr.read()!r}")
    wait_for(lambda: all(s.children() for s in servers), timeout=15, what="randread running")
    process.send_signal(signal.SIGTERM)
    rest, stderr = process.communicate(timeout=60)
    # A push refused after SIGTERM (nothing listens on the gateway's port) is a line of
    # its own; the interruption keeps the exit status and the last word.
    assert process.returncode == 128 + signal.SIGTERM, "".join(seen) + rest.decode()
    assert "fioprobe: push failed too: " in stderr.decode()
    assert stderr.decode().strip().splitlines()[-1] == (
        "fioprobe: error: interrupted by SIGTERM; fio's client told the servers to stop; the "
        "benchmark's files were removed"
    )
    assert "clean-up: the benchmark's files removed on 3 servers" in rest.decode()
    _nothing_left(servers)


def test_a_server_that_is_not_there_fails_the_benchmark_and_cleans_the_others(
    tmp_path: Path, servers: list[FioServer]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 4"))
    absent, no_gateway = services.free_port(), services.free_port()
    done = fioprobe(
        "distributed", "--plan", str(plan), "-o", str(tmp_path / "archive"),
        "--servers", ",".join([*(s.address for s in servers), f"127.0.0.1:{absent}"]),
        "--gateway", f"http://127.0.0.1:{no_gateway}", "--attempts", "1", "--timeout", "5",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    # The phase's error decides the exit status and ends stderr; the refused push (nothing
    # listens on its port) is its own line before it.
    *before, message = done.stderr.decode().strip().splitlines()
    assert re.match(r"fioprobe: error: phase prepare: ", message), message
    assert [line for line in before if line.startswith("fioprobe: push failed too: ")]
    # fio's client exits 0 without a server it could not reach: the clean-up says which.
    assert (
        f"clean-up: the benchmark's files removed on 3 of 4 servers; no answer from "
        f"127.0.0.1:{absent}: its working directory may still hold bench.* files"
    ) in done.stdout.decode()
    _nothing_left(servers)


def test_a_prepare_cut_short_by_its_runtime_stops_the_benchmark(
    tmp_path: Path, servers: list[FioServer], pushgateway: services.Service
) -> None:
    """fio ends a job at its runtime and calls it success: a prepare that did not lay out the
    whole data set fails the benchmark, by name (in the error and the push), before a random
    phase measures a smaller one. 2 GiB in 4k writes within 1 s would take 500k IOPS: far
    beyond this machine."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        PLAN.replace("servers: 3", "servers: 1")
        .replace("file_size: 8m", "file_size: 1g\nprepare_block_size: 4k")
        .replace("prepare_runtime: 20", "prepare_runtime: 1")
        .replace("128m", "8g")
    )
    done = fioprobe(
        "distributed", "--plan", str(plan), "--servers", servers[0].address,
        "-o", str(tmp_path / "archive"), "--gateway", pushgateway.url,
    )  # fmt: skip
    stdout = done.stdout.decode()
    assert done.returncode == 1, done.stderr.decode() + stdout
    message = done.stderr.decode().strip()
    group = gateway_group(pushgateway, benchmark="accept", storageclass="local-disk")
    assert group is not None
    (reason,) = group["fioprobe_distributed_failure_reason_info"]
    assert reason["labels"]["reason"] == "timeout"
    (server,) = group["fioprobe_distributed_server_success"]
    assert (server["labels"]["server"], float(server["value"])) == (servers[0].address, 0.0)
    assert re.fullmatch(
        r"fioprobe: error: phase prepare: the data set was not laid out within prepare_runtime "
        rf"\(1s\): {re.escape(servers[0].address)} wrote \d+ of 2147483648 bytes; raise "
        r"prepare_runtime or lower file_size, or the random phases would measure a smaller "
        r"data set",
        message,
    ), message
    assert "phase randread" not in stdout
    assert "clean-up: the benchmark's files removed on 1 servers" in stdout
    _nothing_left(servers[:1])


def _client(plan: Path, ports: list[int], archive: Path, wait: str) -> subprocess.Popen[bytes]:
    """`fioprobe distributed --wait-for-servers` in the background, its first line read."""
    client = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "distributed", "--plan", str(plan),
         "--servers", ",".join(f"127.0.0.1:{port}" for port in ports),
         "-o", str(archive), "--wait-for-servers", wait],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert client.stdout is not None
    ready, _, _ = select.select([client.stdout], [], [], 60)
    assert ready, "the client printed nothing in 60 s"
    first = client.stdout.readline().decode()
    assert first == f"waiting up to {wait}s for {len(ports)} fio servers to listen\n", first
    return client


def _distinct_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:  # free_port may hand out a port twice
        port = services.free_port()
        if port not in ports:
            ports.append(port)
    return ports


def test_a_client_waits_for_servers_that_start_after_it(tmp_path: Path) -> None:
    """--wait-for-servers: a client started beside its servers (one apply, one Helm release)
    sends nothing, not even to a server already there, until every server listens, then
    runs; a server that never comes fails the benchmark by name after the wait, with nothing
    sent and nothing to clean."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 2") + "phases: [prepare]\n")
    ports = _distinct_ports(2)
    with fio_servers(tmp_path / "early", 1, ports=ports[:1]) as early:
        client = _client(plan, ports, tmp_path / "archive", "120")
        try:
            time.sleep(3)  # the client keeps trying meanwhile: one server listens, one not
            assert client.poll() is None
            # (Its children are not looked at: each connection of the wait forks one.)
            assert early[0].files() == [], "a job was sent before every server listened"
            with fio_servers(tmp_path / "late", 1, ports=ports[1:]) as late:
                stdout, stderr = client.communicate(timeout=120)
                assert client.returncode == 0, stderr.decode() + stdout.decode()
                assert re.match(r"all 2 fio servers listening after \d+s\n", stdout.decode())
                assert "clean-up: the benchmark's files removed on 2 servers" in stdout.decode()
                _nothing_left([*early, *late])
        finally:
            if client.poll() is None:
                os.killpg(client.pid, signal.SIGKILL)
                client.wait(timeout=10)

    absent = services.free_port()
    plan.write_text(PLAN.replace("servers: 3", "servers: 1"))
    done = fioprobe(
        "distributed", "--plan", str(plan), "--servers", f"127.0.0.1:{absent}",
        "-o", str(tmp_path / "archive2"), "--wait-for-servers", "2",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    assert done.stderr.decode() == (
        f"fioprobe: error: no fio server listening at 127.0.0.1:{absent} after 2s "
        "(--wait-for-servers); nothing was sent to any server\n"
    )
    assert done.stdout.decode().splitlines()[-1] == (
        "clean-up: no job was sent, so no server holds a file"
    )


def test_sigterm_while_waiting_for_servers_sends_nothing_and_exits_143(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 1"))
    client = _client(plan, _distinct_ports(1), tmp_path / "archive", "60")
    try:
        time.sleep(1)
        client.send_signal(signal.SIGTERM)
        stdout, stderr = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait(timeout=10)
    assert client.returncode == 143, stderr.decode()
    assert stderr.decode() == (
        "fioprobe: error: interrupted by SIGTERM; no job had been sent to any server\n"
    )
    assert (
        stdout.decode().splitlines()[-1] == "clean-up: no job was sent, so no server holds a file"
    )


def test_a_file_size_in_part_blocks_is_a_whole_prepare(
    tmp_path: Path, servers: list[FioServer]
) -> None:
    """fio writes whole blocks of a job's size: 1000k in 64k blocks is 960k per file, a
    whole prepare, not one cut short."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        PLAN.replace("servers: 3", "servers: 1").replace(
            "file_size: 8m", "file_size: 1000k\nprepare_block_size: 64k"
        )
        + "phases: [prepare]\n"
    )
    done = fioprobe(
        "distributed", "--plan", str(plan), "--servers", servers[0].address,
        "-o", str(tmp_path / "archive"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode() + done.stdout.decode()
    _nothing_left(servers[:1])


def test_an_iodepth_sweep_gives_response_curves(tmp_path: Path, servers: list[FioServer]) -> None:
    """`iodepths` runs each random phase once per IO depth; `report` on the archive then
    draws latency against IOPS per StorageClass, from fio's aggregate of every server."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        PLAN.replace("iodepth: 4\n", "iodepths: [1, 2, 4]\n").replace(
            "runtime: 2\n", "runtime: 1\n"
        )
        + "phases: [prepare, randread]\n"
    )
    archive = tmp_path / "archive"
    done = fioprobe(
        "distributed", "--plan", str(plan), "--servers", ",".join(s.address for s in servers),
        "-o", str(archive),
    )  # fmt: skip
    stdout = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + stdout
    phases = re.findall(r"^phase (\S+) \(", stdout, re.MULTILINE)
    assert phases == ["prepare", "randread-qd1", "randread-qd2", "randread-qd4"]
    _nothing_left(servers)
    aggregate = archive / "accept_local-disk-fio-all-servers"
    assert sorted(p.name for p in aggregate.iterdir()) == [
        "prepare.json",
        "randread-qd1.json",
        "randread-qd2.json",
        "randread-qd4.json",
    ]
    report = fioprobe("report", str(archive), "-o", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr.decode()
    data = json.loads((tmp_path / "report" / "report.json").read_text())
    curves = [
        s
        for s in _objects(data, "option", "family", "op", "curves")
        if s["family"].startswith("All clients")
    ]
    (curve,) = [s for s in curves if s["op"] == "read"]
    points = curve["curves"]["local-disk"]
    assert [p["setting"] for p in points] == [1, 2, 4]
    assert all(p["iops"] > 0 for p in points)


def test_a_phase_past_its_deadline_is_stopped_on_every_server(
    tmp_path: Path, servers: list[FioServer]
) -> None:
    """fio's client past the deadline: stopped, and with it every server's jobs."""
    from fioprobe.distributed.client import run_client
    from fioprobe.distributed.jobs import checked_job, cleanup_job
    from fioprobe.distributed.plan import parse_plan
    from fioprobe.distributed.servers import parse_servers
    from fioprobe.errors import FailureReason, ProbeFailure

    plan = parse_plan(PLAN.replace("128m", "64g"), "plan.yaml")
    text = (
        "# fioprobe-budget-bytes: 68719476736\n# fioprobe-budget-seconds: 60\n"
        "[global]\nioengine=psync\nsize=8m\nloops=1000\nruntime=30\n[bench]\nrw=randread\n"
    )
    job = checked_job(plan, "randread", text)
    addresses = parse_servers(",".join(s.address for s in servers))
    with pytest.raises(ProbeFailure) as caught:
        run_client("fio", addresses, job.text, deadline_seconds=3)
    assert caught.value.reason is FailureReason.TIMEOUT
    for server in servers:
        wait_for(lambda s=server: not s.children(), timeout=15, what="server jobs to end")
    assert _clients_of(servers) == []
    run_client("fio", addresses, cleanup_job(plan), deadline_seconds=30, output_format="json")
    _nothing_left(servers)


@pytest.mark.parametrize("inside", [False, True], ids=["a file", "under a file"])
def test_an_output_that_is_not_a_directory_is_refused_before_any_server(
    tmp_path: Path, inside: bool
) -> None:
    """-o a regular file: one precise line, exit 2, no traceback, nothing contacted (the
    servers' port has no listener: contacting it would fail the prepare phase instead)."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.replace("servers: 3", "servers: 1"))
    regular = tmp_path / "results"
    regular.write_text("not a folder\n")
    output = regular / "sub" if inside else regular
    done = fioprobe(
        "distributed", "--plan", str(plan), "-o", str(output),
        "--servers", f"127.0.0.1:{services.free_port()}",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode() == (
        f"fioprobe: error: --output {output}: {regular} is not a directory\n"
    )
    assert done.stdout.decode() == ""
    assert regular.read_text() == "not a folder\n"


def test_a_full_archive_disk_fails_the_phase_clearly_and_keeps_no_partial_file(
    tmp_path: Path, servers: list[FioServer]
) -> None:
    """ENOSPC while keeping a phase's output: the phase fails with the system's reason
    (exit 1, no traceback), the clean-up still runs, and no half-written file is left."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN + "phases: [prepare]\n")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], check=True)
    try:
        done = fioprobe(
            "distributed", "--plan", str(plan), "-o", str(full / "archive"),
            "--servers", ",".join(s.address for s in servers),
        )  # fmt: skip
        stderr = done.stderr.decode()
        assert done.returncode == 1, stderr
        assert "Traceback" not in stderr
        last = stderr.strip().splitlines()[-1]
        expected = f"phase prepare: its output could not be kept under {full}/archive: "
        assert last.startswith(f"fioprobe: error: {expected}No space left on device"), stderr
        assert "clean-up: the benchmark's files removed on 3 servers" in done.stdout.decode()
        assert list(full.iterdir()) == []
        _nothing_left(servers)
    finally:
        subprocess.run(["umount", str(full)], check=False)
