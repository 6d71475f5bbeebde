"""`make demo`'s program, run as a newcomer runs it: the whole chain up to an alert.

One full run: real Pushgateway, Prometheus with the mixin's rules, Alertmanager, three disks
(two on tmpfs, one on the slow FUSE disk). Checked while it runs: the rules are loaded,
Alertmanager receives FioProbeEtcdFsyncLatencyHigh for the slow disk and for no other, the
dashboard previews are real PNGs, Grafana provisioning sends the datasource and the three
dashboards (to a recording server: no Grafana can be installed here). Then every way of
stopping it (SIGTERM, Ctrl-C, SIGHUP) must leave no process, mount or file behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from support import hostile_http as hostile
from support import slowfs
from support.fixtures import fuse_unavailable

pytestmark = pytest.mark.slow

ALERT = "FioProbeEtcdFsyncLatencyHigh"
#: Bound on the wait for the first firing alert: two slow rounds of 6 s, the scrape and the
#: evaluation, with room for a loaded machine.
ALERT_WITHIN_S = 150


class Demo:
    """A running `fioprobe demo` and what its header says."""

    def __init__(self, workdir: Path, previews: Path | None, env: dict[str, str]) -> None:
        command = [sys.executable, "-m", "fioprobe", "demo", "--interval", "6",
                   "--workdir", str(workdir), "--preview-every", "2"]  # fmt: skip
        if previews:
            command += ["--previews", str(previews)]
        self.workdir = workdir
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **env}, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_line(self, pattern: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if re.search(pattern, line):
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"no line matching {pattern!r} in:\n{self.output}")

    def url(self, name: str) -> str:
        match = re.search(rf"{name} (http://127\.0\.0\.1:\d+)", self.output)
        assert match, self.output
        return match.group(1)

    def stop(self, signum: int) -> int:
        self.process.send_signal(signum)
        try:
            return self.process.wait(60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(30)
                self._reap()  # the failure stands; nothing of the demo is left running
            self._reader.join(10)

    def _reap(self) -> None:
        """After the demo was killed (it could not clean up): its servers run in sessions of
        their own and its slow disk stays mounted. Kill what was started in its workdir and
        detach the mounts beneath it."""
        root = os.path.realpath(self.workdir)

        def inside(path: str) -> bool:
            return path == root or path.startswith(root + "/")

        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:  # the servers run in the workdir; the slow disk names it on its command line
                command = (entry / "cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            # A path argument, alone or as an option's value (--storage.tsdb.path=DIR).
            named = any(inside(arg.decode(errors="replace").rpartition("=")[2]) for arg in command)
            if named or inside(cwd):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)
        for mount_point in slowfs.mount_points_under(root):
            with contextlib.suppress(RuntimeError):  # reported by the test's own checks
                slowfs.force_unmount(mount_point)


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


def answering(urls: list[str]) -> list[str]:
    still = []
    for url in urls:
        host, port = url.removeprefix("http://").split(":")
        with socket.socket() as sock:
            sock.settimeout(2)
            if sock.connect_ex((host, int(port))) == 0:
                still.append(url)
    return still


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that name `text` (the demo's directories)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def assert_nothing_left(demo: Demo) -> None:
    urls = [demo.url(n) for n in ("Pushgateway", "Prometheus", "Alertmanager")]
    assert answering(urls) == []
    assert list(demo.workdir.iterdir()) == [], "the demo left files in its work directory"
    memory = re.search(r"probing memory\s+(\S+)", demo.output)
    if memory:
        assert not Path(memory.group(1)).exists()
    assert processes_mentioning(str(demo.workdir)) == []
    mounts = Path("/proc/mounts").read_text()
    assert str(demo.workdir) not in mounts


@pytest.fixture
def shm_workdir(tmp_path: Path):
    """A work directory on tmpfs, so that the "local disk" is fast whatever the host does."""
    base = Path("/dev/shm")
    if not base.is_dir():
        pytest.skip("/dev/shm is missing")
    path = base / f"fioprobe-demo-test-{os.getpid()}-{tmp_path.name}"
    path.mkdir()
    yield path
    for leftover in sorted(path.rglob("*"), reverse=True):  # only if the test failed
        if leftover.is_dir():
            leftover.rmdir()
        else:
            leftover.unlink()
    path.rmdir()


def test_demo_fires_for_the_slow_disk_only_draws_dashboards_and_cleans_up(
    shm_workdir: Path, tmp_path: Path
) -> None:
    if reason := fuse_unavailable():
        pytest.skip(reason)
    previews = tmp_path / "previews"
    grafana = hostile.HostileServer(hostile.json_answer({"status": "success"}), max_connections=20)
    with grafana:
        demo = Demo(shm_workdir, previews,
                    {"GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": "demo-token"})  # fmt: skip
        try:
            demo.wait_for_line(r"^--- round 1 ", timeout=120)
            prometheus, alertmanager = demo.url("Prometheus"), demo.url("Alertmanager")
            rules = get(f"{prometheus}/api/v1/rules")["data"]["groups"]  # type: ignore[index]
            names = {r["name"] for g in rules for r in g["rules"]}
            assert ALERT in names and "FioProbeStale" in names, names

            firing: list[dict] = []
            deadline = time.monotonic() + ALERT_WITHIN_S
            while time.monotonic() < deadline and not firing:
                alerts = get(f"{alertmanager}/api/v2/alerts")
                firing = [a for a in alerts if a["labels"]["alertname"] == ALERT]  # type: ignore[union-attr,index]
                time.sleep(1)
            assert firing, f"no {ALERT} at Alertmanager within {ALERT_WITHIN_S}s:\n{demo.output}"
            assert {a["labels"]["storageclass"] for a in firing} == {"slow-disk"}
            demo.wait_for_line(r"slow-disk .*FIRING at Alertmanager", timeout=60)
            # The short stall between two scheduled runs: the stream saw an fdatasync wait
            # seconds; the probe's run after it measured the disk's usual tens of ms.
            demo.wait_for_line(r"^  now: slow-disk stalls for 3 s", timeout=120)
            demo.wait_for_line(r"^--- round 3 ", timeout=120)
            after = demo.output.split("now: slow-disk stalls", 1)[1]
            row = re.search(r"^  slow-disk +([\d.]+) ms .* ([\d.]+) s ", after, re.M)
            assert row, after
            assert float(row.group(2)) >= 1.0, f"the stream did not see the stall: {row.group(0)}"
            assert float(row.group(1)) < 1000, "the scheduled run cannot have seen it"
            demo.wait_for_line(r"dashboards drawn", timeout=120)
            # Grafana is provisioned right after the first drawing: stopping before that
            # line would stop it halfway.
            demo.wait_for_line(r"provisioned into ", timeout=60)
            pictures = sorted(previews.glob("*.png"))
            assert [p.name for p in pictures] == [
                "fioprobe-comparison.png", "fioprobe-etcd-disks.png", "fioprobe-overview.png"
            ]  # fmt: skip
            for picture in pictures:
                data = picture.read_bytes()
                assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
            # No other disk ever reached Alertmanager.
            alerts = get(f"{alertmanager}/api/v2/alerts")
            others = [a for a in alerts if a["labels"]["alertname"] == ALERT  # type: ignore[union-attr,index]
                      and a["labels"]["storageclass"] != "slow-disk"]  # fmt: skip
            assert others == []
        finally:
            code = demo.stop(signal.SIGTERM)
    assert code == 0, demo.output
    assert "stopped; every process, mount and file it made is gone" in demo.output
    assert "Traceback" not in demo.output
    assert_nothing_left(demo)
    posts = [(r.method, r.path) for r in grafana.requests]
    assert ("POST", "/api/datasources") in posts
    assert posts.count(("POST", "/api/dashboards/db")) == 3
    assert all(r.headers.get("authorization") == "Bearer demo-token" for r in grafana.requests)
    assert (previews / "fioprobe-overview.png").exists()  # asked for elsewhere: kept


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP, signal.SIGTERM])
def test_every_stop_signal_removes_everything(shm_workdir: Path, signum: int) -> None:
    demo = Demo(shm_workdir, None, {})
    try:
        demo.wait_for_line(r"^--- round 1 ", timeout=120)
    finally:
        code = demo.stop(signum)
    assert code == 0, demo.output
    assert "Traceback" not in demo.output
    assert_nothing_left(demo)
    # A second demo right after works (free ports, no mount in the way).
    again = Demo(shm_workdir, None, {})
    try:
        again.wait_for_line(r"^--- round 1 ", timeout=120)
    finally:
        assert again.stop(signal.SIGINT) == 0
    assert_nothing_left(again)
