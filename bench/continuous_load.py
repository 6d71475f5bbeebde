"""The stream at its pod's limits: a connection flood, and scrapes competing with the writer.

Why this exists: the continuous stream is the etcd disks' watchdog, so what its /metrics port
takes must not blind it or bend what it measures. Two measurements, real processes only, the
stream inside cgroup v1 groups that apply the chart's limit for its container (memory
128 MiB) and, where the condition says so, a CPU limit of 200m (a CFS quota of 20 ms per
100 ms; the chart's default until these measurements):

1. **Flood.** 3,000 idle connections (reopened as the server closes them) and 100 clients that
   read the answer a byte a second, for 60 s, from a process of their own, against the stream
   on tmpfs; a scrape every 0.5 s with a 5 s timeout (the path the kubelet's probes use too);
   without a CPU limit (the chart's default) and with the 200m quota (a limit a user may set).
   Reported: scrapes answered and why the others failed, the slowest answer, whether the
   process lived, the cgroup's peak memory, and the longest gap between two of the writer's
   writes (its file's modification times; its cadence is 1 s).
2. **Scrape load.** The stream on tmpfs behind the FUSE passthrough at 0 ms (every fdatasync
   goes through the slow disk's daemon, as in the other benchmarks), 60 s per condition: quiet
   (no scrape but the two that read the counters) and 16 scrape loops, each with the 200m quota
   and without a CPU limit. Reported: fdatasyncs above 10 ms of all, stalled seconds, and the
   CFS periods in which the cgroup was throttled.

Needs root (FUSE, cgroups). About 6 minutes. Every process is stopped by PID, every cgroup
and mount removed, every loop bounded in count and time.

    PYTHONPATH=tests:bench .venv/bin/python bench/continuous_load.py [--seconds 60] [--part flood]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from support import services
from support.slowfs import slow_fs

REPO = Path(__file__).resolve().parents[1]
CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMORY_LIMIT = 128 * 2**20
CPU_PERIOD_US, CPU_QUOTA_US = 100_000, 20_000  # 200m
SCRAPE_LOOPS = 16


@contextlib.contextmanager
def cgroups(cpu_quota: bool) -> Iterator[list[Path]]:
    """A memory group at the pod's limit and a cpu group, with or without the quota."""
    name = f"fioprobe-bench-{secrets.token_hex(4)}"
    made = []
    try:
        memory = CGROUP_ROOT / "memory" / name
        memory.mkdir()
        made.append(memory)
        (memory / "memory.limit_in_bytes").write_text(str(MEMORY_LIMIT))
        cpu = CGROUP_ROOT / "cpu" / name
        cpu.mkdir()
        made.append(cpu)
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        if cpu_quota:
            (cpu / "cpu.cfs_quota_us").write_text(str(CPU_QUOTA_US))
        yield made
    finally:
        for group in reversed(made):
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


@contextlib.contextmanager
def stream_in(groups: list[Path], directory: Path, name: str) -> Iterator[tuple[int, int]]:
    """`fioprobe continuous` in `groups` (its writers follow it); (pid, port)."""
    port = services.free_port()

    def enter() -> None:
        for group in groups:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "continuous", "--listen", f"127.0.0.1:{port}",
         "--dir", str(directory), "--storageclass", name],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=REPO, preexec_fn=enter,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                services.scrape(f"http://127.0.0.1:{port}/metrics", 1.0)
                break
            time.sleep(0.2)
        yield process.pid, port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def value(samples: services.Samples, name: str, **labels: str) -> float:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls)]
    return found[0] if found else 0.0


def slow_and_stalled(port: int) -> tuple[float, float, float]:
    """(fdatasyncs, those above 10 ms, stalled seconds) so far."""
    s = services.scrape(f"http://127.0.0.1:{port}/metrics", 10.0)
    count = value(s, "fioprobe_continuous_sync_latency_seconds_count")
    fast = value(s, "fioprobe_continuous_sync_latency_seconds_bucket", le="0.01")
    return count, count - fast, value(s, "fioprobe_continuous_stall_seconds_total")


FLOOD_CHILD = """
import resource, sys, threading, time
from support.continuous import flood
port, seconds = int(sys.argv[1]), float(sys.argv[2])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, hard), hard))
stop = threading.Event()
with flood(port, stop, idle_connections=3000, slow_clients=100, seconds=seconds) as counts:
    stop.wait(seconds)
print(counts, flush=True)
"""


@contextlib.contextmanager
def flooding(port: int, seconds: float) -> Iterator[dict[str, int]]:
    """The flood from a process of its own: its hundred threads do not share the scraping
    client's interpreter lock, so a late scrape is the server's doing, not the client's."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}  # support
    child = subprocess.Popen(
        [sys.executable, "-c", FLOOD_CHILD, str(port), str(seconds)], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    counts: dict[str, int] = {}
    try:
        yield counts
    finally:
        try:
            out, _ = child.communicate(timeout=seconds + 60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate(timeout=10)
            raise RuntimeError("the flood did not end within its time") from None
    if child.returncode != 0:
        raise RuntimeError(f"the flood failed (exit {child.returncode})")
    counts.update(ast.literal_eval(out.strip().splitlines()[-1]))


@contextlib.contextmanager
def write_gaps(directory: Path) -> Iterator[list[float]]:
    """The gaps between the writer's successive writes, from its file's modification times
    (the kernel stamps each pwrite), polled every 20 ms: the writer's cadence as the disk saw
    it, not as scrapes that may have failed saw it."""
    files: list[Path] = []
    for _ in range(100):  # the writer creates its file once the server is up: 10 s at most
        files = [f for f in directory.rglob("*") if f.is_file()]
        if files:
            break
        time.sleep(0.1)
    gaps: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        last = max((f.stat().st_mtime_ns for f in files), default=0)
        deadline = time.monotonic() + 3600
        while not stop.wait(0.02) and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                now = max(f.stat().st_mtime_ns for f in files)
                if now != last:
                    gaps.append((now - last) / 1e9)
                    last = now

    if not files:
        raise RuntimeError(f"no file of the writer's under {directory}")
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield gaps
    finally:
        stop.set()
        thread.join(timeout=5)


def flood_run(seconds: float, quota: bool) -> dict[str, object]:
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="fioprobe-flood-"))
        groups = stack.enter_context(cgroups(quota))
        pid, port = stack.enter_context(stream_in(groups, Path(tmp), "flooded"))
        url = f"http://127.0.0.1:{port}/metrics"
        tries = answered = 0
        failures: dict[str, int] = {}
        slowest = 0.0
        gaps = stack.enter_context(write_gaps(Path(tmp)))
        with flooding(port, seconds) as opened:
            time.sleep(2)  # the flood's connections opened
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                tries += 1
                asked = time.monotonic()
                try:
                    with urllib.request.urlopen(url, timeout=5) as response:
                        if b"fioprobe_continuous_operations_total" in response.read():
                            answered += 1
                            slowest = max(slowest, time.monotonic() - asked)
                except OSError as exc:
                    reason = type(getattr(exc, "reason", exc)).__name__
                    failures[reason] = failures.get(reason, 0) + 1
                time.sleep(0.5)
        alive = Path(f"/proc/{pid}").exists()
        peak = int((groups[0] / "memory.max_usage_in_bytes").read_text())
        failcnt = int((groups[0] / "memory.failcnt").read_text())
    return {
        "flood_opened": opened, "tries": tries, "answered": answered, "failures": failures,
        "slowest_answer_s": round(slowest, 3), "alive": alive, "peak_memory_bytes": peak,
        "memory_failcnt": failcnt, "writes": len(gaps),
        "longest_gap_between_writes_s": round(max(gaps, default=0.0), 3),
    }  # fmt: skip


def scrape_loops(port: int, loops: int, stop: threading.Event) -> list[threading.Thread]:
    url = f"http://127.0.0.1:{port}/metrics"

    def loop() -> None:
        deadline = time.monotonic() + 600
        while not stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=5).read()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(loops)]
    for t in threads:
        t.start()
    return threads


def load_run(seconds: float, quota: bool, loops: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="fioprobe-load-") as tmp, cgroups(quota) as groups:
        backing, mount = Path(tmp) / "backing", Path(tmp) / "mnt"
        backing.mkdir()
        mount.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(backing)],
                       check=True)  # fmt: skip
        try:
            with (
                slow_fs(backing, mount, fsync_delay_ms=0.0),
                stream_in(groups, mount, "loaded") as (_, port),
            ):
                time.sleep(5)
                before = slow_and_stalled(port)
                stat_before = (groups[1] / "cpu.stat").read_text()
                stop = threading.Event()
                threads = scrape_loops(port, loops, stop)
                time.sleep(seconds)
                stop.set()
                for t in threads:
                    t.join(timeout=10)
                after = slow_and_stalled(port)
                stat_after = (groups[1] / "cpu.stat").read_text()
        finally:
            subprocess.run(["umount", str(backing)], check=False)

    def stat(text: str) -> dict[str, int]:
        return {k: int(v) for k, v in (line.split() for line in text.splitlines())}

    throttled = stat(stat_after)["nr_throttled"] - stat(stat_before)["nr_throttled"]
    periods = stat(stat_after)["nr_periods"] - stat(stat_before)["nr_periods"]
    return {
        "fdatasyncs": after[0] - before[0], "above_10ms": after[1] - before[1],
        "stalled_s": round(after[2] - before[2], 3), "throttled_periods": throttled,
        "periods": periods,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--part", choices=("all", "flood", "load"), default="all")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root (FUSE, cgroups)")
    for quota in (False, True) if args.part in ("all", "flood") else ():
        what = "quota 200m" if quota else "no CPU limit (the default)"
        print(f"flood, {what}:", flood_run(args.seconds, quota), flush=True)
    loads = [(True, 0), (True, SCRAPE_LOOPS), (False, 0), (False, SCRAPE_LOOPS)]
    for quota, loops in loads if args.part in ("all", "load") else ():
        result = load_run(args.seconds, quota, loops)
        what = f"{'quota 200m' if quota else 'no CPU limit'}, {loops or 'no'} scrape loops"
        print(f"{what}: {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
