"""The continuous stream against the scheduled probe: stalls seen, cost, footprint, a busy host.

Why this exists: `fioprobe continuous` (docs/CONTINUOUS.md) claims to see the disk stalls of
seconds that a probe run every 5 minutes misses, at a fraction of the probe's cost. That is
measured here with real processes only, in one run, all at the same time:

1. **Stalls.** Two slow FUSE disks (`fioprobe.demo.slowdisk` over tmpfs). On each, the stream
   (`fioprobe continuous`, 1 s interval) in one directory and the etcd-fsync probe
   (`fioprobe probe`, pushing to a real Pushgateway) every 60 s in a sibling directory; one
   real Prometheus scrapes both streams and the Pushgateway every 15 s. Each disk gets a
   seeded, shuffled schedule of stalls of 5, 10, 30 and 120 s (every fsync/fdatasync +300 ms,
   `SlowFs.set_delays`), 10-40 s apart. Per stall: did a Prometheus sample of the stream show
   it (fdatasyncs above 10 ms rose, or the in-flight age >= 1 s), and how long after the stall
   began; did a probe run overlapping it push counts above 10 ms or a p99 above 10 ms.
2. **Cost.** The stream (1 target) and, separately, the probe on ext4 over loop devices: bytes
   at the application (the stream's counter, fio's written bytes) and at the device (written
   sectors in /sys/block/loopN/stat), scaled to a day; the stream over its first pass through
   its preallocated file (unwritten extents converted) and after it wrapped.
3. **Footprint.** Summed PSS (smaps_rollup) and CPU (utime+stime) of the stream's processes,
   parent and writer children, with 1 target and with 4.
4. **A healthy busy host.** A third slow disk with no added delay, both CPUs kept busy by two
   busy loops for the whole run: the latency distribution the stream measured, then a promtool
   test that replays it (per 15 s scrape, cycled) over the longest window of the shipped
   FioProbeContinuous* rules, with two restarts and a 1-minute scrape gap, expecting no alert.

Everything runs in parallel (the busy loops load the CPUs for items 1-3 too); the whole run is
about 65 minutes (`--quick`: about 4). Needs root (FUSE, loop devices). Every process started
is stopped by PID, every mount and loop device is removed, every loop is bounded.

    PYTHONPATH=tests:bench .venv/bin/python bench/continuous_stalls.py [--quick] [--seed 1]
        [--json FILE] [--write]
    ... bench/continuous_stalls.py --from-json FILE [--write]   # re-render, re-run promtool
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import itertools
import json
import math
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from benchdoc import write_section
from prometheus_client.parser import text_string_to_metric_families
from support import services
from support.slowfs import SlowFs, slow_fs
from support.throttle import LoopMount, loop_mount

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "alerts" / "out" / "rules.yaml"
HEADING = "## The continuous stream: stalls seen, cost, footprint"

STALL_LENGTHS = (5.0, 10.0, 30.0, 120.0)
STALL_DELAY_MS = 300.0
WRITE_SIZE = 2300
STREAM_INTERVAL = 1.0
SCRAPE = "15s"
SCRAPE_SECONDS = 15.0
SLOW_LE = "0.01"
CRONJOB_PERIOD = 300.0
RUNS_PER_DAY = 86400 / CRONJOB_PERIOD
#: A probe run is budgeted 20 s; this bounds one CLI call.
PROBE_TIMEOUT = 90.0
LOOP_SIZE = 256 * 1024 * 1024
SECTOR = 512
H = "fioprobe_continuous_sync_latency_seconds"
ALERTS = 'ALERTS{alertname=~"FioProbeContinuous.*"}'


@dataclass(frozen=True)
class Plan:
    per_length_per_disk: int
    lengths: tuple[float, ...]
    gap: tuple[float, float]
    probe_period: float
    busy_seconds: float
    cost_probe_runs: int
    quick: bool


FULL = Plan(10, STALL_LENGTHS, (10.0, 40.0), 60.0, 3600.0, 5, False)
QUICK = Plan(1, tuple(x / 4 for x in STALL_LENGTHS), (5.0, 10.0), 20.0, 75.0, 2, True)


# --- small helpers -----------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


def scrape(url: str, timeout: float = 5.0) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def pick(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
    return sum(v for n, ls, v in samples if n == name and labels.items() <= ls.items())


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def loadavg() -> float:
    return os.getloadavg()[0]


class Stream:
    """One `fioprobe continuous` process, stopped by PID."""

    def __init__(self, workdir: Path, name: str, args: list[str]) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fioprobe",
                    "continuous",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    *args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=REPO,
            )
        services.wait_for(self._up, 30, f"{name} serves /metrics", 0.2)

    def _up(self) -> bool:
        try:
            return bool(scrape(self.url, 1.0))
        except OSError:
            return False

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        return scrape(self.url)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextlib.contextmanager
def stream(workdir: Path, name: str, *args: str) -> Iterator[Stream]:
    handle = Stream(workdir, name, list(args))
    try:
        yield handle
    finally:
        handle.stop()


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def written_sectors(device: str) -> int:
    return int(Path(f"/sys/block/{Path(device).name}/stat").read_text().split()[6])


def run_probe(disk_dir: Path, storageclass: str, gateway: str) -> tuple[float, float, int]:
    """One `fioprobe probe` run as a CronJob makes it: (start, end wall time, exit code)."""
    started = time.time()
    try:
        code = subprocess.run(
            [
                sys.executable,
                "-m",
                "fioprobe",
                "probe",
                "--profile",
                "etcd-fsync",
                "--dir",
                str(disk_dir),
                "--gateway",
                gateway,
                "--storageclass",
                storageclass,
                "--etcd-disk",
                "--quiet",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=REPO,
            timeout=PROBE_TIMEOUT,
            check=False,
        ).returncode
    except subprocess.TimeoutExpired:
        code = -1
    return started, time.time(), code


def pushed(gateway: str, storageclass: str) -> dict[str, float]:
    """What the Pushgateway holds for the probe group (what Prometheus scrapes from it)."""
    samples = [s for s in scrape(gateway + "/metrics") if s[1].get("storageclass") == storageclass]
    p99 = [
        v
        for n, ls, v in samples
        if n == "fioprobe_last_sync_latency_seconds" and ls.get("quantile") == "0.99"
    ]
    return {
        "count": pick(samples, "fioprobe_sync_latency_seconds_count"),
        "le_10ms": pick(samples, "fioprobe_sync_latency_seconds_bucket", le=SLOW_LE),
        "p99": max(p99) if p99 else float("nan"),
        "written": pick(samples, "fioprobe_written_bytes_total"),
        "runs": pick(samples, "fioprobe_runs_total"),
    }


# --- 1. stalls ---------------------------------------------------------------------------------


@dataclass
class Disk:
    name: str
    fs: SlowFs
    storageclass: str
    stream: Stream
    probe_dir: Path
    plan: list[tuple[float, float]]
    probe_offset: float
    stalls: list[dict[str, float]] = field(default_factory=list)
    runs: list[dict[str, float]] = field(default_factory=list)


def schedule(plan: Plan, rng: random.Random) -> list[tuple[float, float]]:
    """(gap before, length) of each stall: each length `per_length_per_disk` times, shuffled."""
    lengths = [length for length in plan.lengths for _ in range(plan.per_length_per_disk)]
    rng.shuffle(lengths)
    return [(rng.uniform(*plan.gap), length) for length in lengths]


def stall_loop(disk: Disk, stop: threading.Event) -> None:
    for gap, length in disk.plan:
        if stop.wait(gap):
            return
        disk.fs.set_delays(fsync_delay_ms=STALL_DELAY_MS, settle_s=0)
        began = time.time()
        try:
            stop.wait(length)
        finally:
            disk.fs.set_delays(fsync_delay_ms=0, settle_s=0)
        disk.stalls.append({"start": began, "end": time.time(), "length": length})
        log(f"{disk.name}: stall {len(disk.stalls)} of {length:g} s done")


def probe_loop(disk: Disk, gateway: str, period: float, stop: threading.Event) -> None:
    """`fioprobe probe` every `period` s (a run that overruns delays the next, as cron's
    concurrencyPolicy: Forbid would), each run's pushed histogram read right after it."""
    before = pushed(gateway, disk.storageclass)
    next_at = time.monotonic() + disk.probe_offset
    while not stop.wait(max(0.0, next_at - time.monotonic())):
        next_at += period
        started, ended, code = run_probe(disk.probe_dir, disk.storageclass, gateway)
        after = pushed(gateway, disk.storageclass)
        disk.runs.append(
            {
                "start": started,
                "end": ended,
                "code": code,
                "above": (after["count"] - after["le_10ms"])
                - (before["count"] - before["le_10ms"]),
                "fsyncs": after["count"] - before["count"],
                "p99": after["p99"] if code == 0 else float("nan"),
                "written": after["written"] - before["written"],
            }
        )
        before = after


def raw_series(prom: str, selector: str, seconds: float, at: float) -> dict[str, list[list[Any]]]:
    """Every raw sample of the selector's series over the last `seconds` before `at`."""
    result = services.query(prom, f"{selector}[{int(seconds) + 60}s]", at=at)
    return {json.dumps(r["metric"], sort_keys=True): r["values"] for r in result}  # type: ignore[index]


def stream_samples(prom: str, storageclass: str, seconds: float, at: float) -> list[list[float]]:
    """[timestamp, fdatasyncs above 10 ms, in-flight age] per scrape of the stream."""
    sel = f'{{storageclass="{storageclass}"}}'
    (count,) = raw_series(prom, f"{H}_count{sel}", seconds, at).values()
    (bucket,) = raw_series(
        prom, f'{H}_bucket{{storageclass="{storageclass}", le="{SLOW_LE}"}}', seconds, at
    ).values()
    (inflight,) = raw_series(
        prom, f"fioprobe_continuous_inflight_seconds{sel}", seconds, at
    ).values()
    le = {t: float(v) for t, v in bucket}
    fl = {t: float(v) for t, v in inflight}
    return [[t, float(v) - le[t], fl.get(t, 0.0)] for t, v in count if t in le]


def judge(
    stalls: list[dict[str, float]], samples: list[list[float]], runs: list[dict[str, float]]
) -> tuple[list[dict[str, Any]], int]:
    """Per stall: seen by the stream (and after how long), overlapped and seen by the probe.

    A rise of the stream's slow count is attributed to a stall when the scrape interval it
    happened in overlaps the stall (or the 0.5 s after it, when its last delayed fdatasync
    ends). Rises in intervals overlapping no stall are counted apart (false alarms).
    """
    tail = (STALL_DELAY_MS / 1000) + 0.2
    windows = [(s["start"], s["end"] + tail) for s in stalls]
    out, false_rises = [], 0
    for prev, cur in itertools.pairwise(samples):
        if cur[1] > prev[1] and not any(a < cur[0] and b > prev[0] for a, b in windows):
            false_rises += 1
    for stall, (a, b) in zip(stalls, windows, strict=True):
        seen_at = None
        for prev, cur in itertools.pairwise(samples):
            if cur[0] <= a:
                continue
            rose = cur[1] > prev[1] and prev[0] < b
            hung = cur[2] >= 1.0 and cur[0] < b
            if rose or hung:
                seen_at = cur[0]
                break
            if prev[0] >= b:
                break
        overlapping = [r for r in runs if r["start"] < b and r["end"] > a]
        by_counts = any(r["above"] > 0 for r in overlapping)
        by_p99 = any(r["p99"] > float(SLOW_LE) for r in overlapping)
        out.append(
            {
                **stall,
                "stream_seen": seen_at is not None,
                "stream_delay": None if seen_at is None else seen_at - stall["start"],
                "probe_overlap": bool(overlapping),
                "probe_seen": by_counts or by_p99,
                "probe_by_counts": by_counts,
                "probe_by_p99": by_p99,
            }
        )
    return out, false_rises


# --- 2./3. cost and footprint on loop devices --------------------------------------------------


def sample_loads(loads: list[float], stop: threading.Event) -> None:
    """The 1-minute load average, every minute until stop."""
    while not stop.wait(60.0):
        loads.append(loadavg())


def footprint(pid: int) -> tuple[int, dict[int, int]]:
    """(summed PSS KiB, {pid: cpu ticks}) of a stream's parent and its writer children."""
    pids = [pid, *children(pid)]
    pss, ticks = 0, {}
    for p in pids:
        with contextlib.suppress(OSError):
            pss += pss_kib(p)
            ticks[p] = cpu_ticks(p)
    return pss, ticks


def watch_stream(
    s: Stream, device: str, stop: threading.Event, every: float
) -> list[dict[str, Any]]:
    """Snapshots (time, operations, written bytes, device sectors, PSS, CPU ticks) until stop."""
    snaps = []
    while True:
        pss, ticks = footprint(s.process.pid)
        try:
            got = s.samples()
        except OSError:  # a slow scrape on the loaded host: the next snapshot counts
            if stop.wait(every):
                return snaps
            continue
        snaps.append(
            {
                "t": time.monotonic(),
                "sectors": written_sectors(device),
                "pss_kib": pss,
                "ticks": ticks,
                "ops": pick(got, "fioprobe_continuous_operations_total"),
                "bytes": pick(got, "fioprobe_continuous_written_bytes_total"),
            }
        )
        if stop.wait(every):
            return snaps


def probe_cost(lm: LoopMount, gateway: str, runs: int) -> dict[str, Any]:
    """`runs` etcd-fsync probe runs on a fresh ext4: fio's bytes and the device's sectors."""
    probe_dir = lm.mountpoint / "probe"
    probe_dir.mkdir()
    run_probe(probe_dir, "cost-probe", gateway)  # first run: the state directory, not counted
    os.sync()
    time.sleep(6)  # jbd2 commits every 5 s
    before_pushed, sectors = pushed(gateway, "cost-probe"), written_sectors(lm.device)
    durations = []
    for _ in range(runs):
        started, ended, code = run_probe(probe_dir, "cost-probe", gateway)
        durations.append(ended - started)
        if code != 0:
            raise RuntimeError(f"cost probe run failed with {code}")
    subprocess.run(["sync", "-f", str(lm.mountpoint)], check=True, timeout=60)
    time.sleep(6)
    after = pushed(gateway, "cost-probe")
    return {
        "runs": runs,
        "fio_bytes_per_run": (after["written"] - before_pushed["written"]) / runs,
        "device_bytes_per_run": (written_sectors(lm.device) - sectors) * SECTOR / runs,
        "run_seconds": durations,
    }


def summarize_stream(snaps: list[dict[str, Any]], file_size: int) -> dict[str, Any]:
    """Device bytes per op in the first pass through the file and after it wrapped; CPU, PSS."""
    per_pass = file_size // WRITE_SIZE
    first = snaps[min(2, len(snaps) - 1)]  # skip set-up (preallocation) and the first ops
    last = snaps[-1]
    wrapped = [s for s in snaps if s["ops"] >= per_pass + 30]

    def window(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float] | None:
        ops = b["ops"] - a["ops"]
        if ops <= 0:
            return None
        return {
            "seconds": b["t"] - a["t"],
            "ops": ops,
            "device_bytes_per_op": (b["sectors"] - a["sectors"]) * SECTOR / ops,
            "app_bytes_per_op": (b["bytes"] - a["bytes"]) / ops,
            "ops_per_second": ops / (b["t"] - a["t"]),
        }

    first_pass_end = [s for s in snaps if s["ops"] < per_pass - 5]
    seconds = last["t"] - first["t"]
    tck = os.sysconf("SC_CLK_TCK")
    cpu = sum(last["ticks"].get(p, t) - t for p, t in first["ticks"].items()) / tck
    return {
        "first_pass": window(first, first_pass_end[-1]) if len(first_pass_end) > 3 else None,
        "after_wrap": window(wrapped[0], last) if len(wrapped) > 3 else None,
        "whole": window(first, last),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "cpu_share": cpu / seconds if seconds > 0 else None,
        "pss_mib_max": max(s["pss_kib"] for s in snaps) / 1024,
        "pss_mib_last": last["pss_kib"] / 1024,
        "processes": len(last["ticks"]),
    }


# --- 4. the healthy busy host, and the promtool test over it -----------------------------------


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(n)
    ]


def distribution(
    samples: list[tuple[str, dict[str, str], float]], storageclass: str
) -> dict[str, float]:
    got = {
        f"le={ls['le']}": v
        for n, ls, v in samples
        if n == f"{H}_bucket" and ls.get("storageclass") == storageclass
    }
    got["count"] = pick(samples, f"{H}_count", storageclass=storageclass)
    got["sum"] = pick(samples, f"{H}_sum", storageclass=storageclass)
    got["stall"] = pick(
        samples, "fioprobe_continuous_stall_seconds_total", storageclass=storageclass
    )
    return got


def scrape_increments(
    prom: str, storageclass: str, seconds: float, at: float
) -> list[dict[str, float]]:
    """Per scrape of the busy stream, how much each counter grew (from Prometheus' samples)."""
    names = f'{{__name__=~"{H}_(bucket|count|sum)|fioprobe_continuous_(stall_seconds|operations|written_bytes)_total", storageclass="{storageclass}"}}'  # noqa: E501
    series: dict[str, dict[float, float]] = {}
    for key, values in raw_series(prom, names, seconds, at).items():
        metric = json.loads(key)
        name = metric["__name__"] + (f"|{metric['le']}" if "le" in metric else "")
        series[name] = {float(t): float(v) for t, v in values}
    times = sorted(set.intersection(*(set(v) for v in series.values())))
    return [
        {name: values[b] - values[a] for name, values in series.items()}
        for a, b in itertools.pairwise(times)
    ]


DURATION = re.compile(r"\[(\d+)([smhd])\]")
UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds_of(text: str) -> int:
    total = 0
    for number, unit in re.findall(r"(\d+)([smhd])", text or ""):
        total += int(number) * UNIT[unit]
    return total


def continuous_rules(rules: dict[str, Any]) -> tuple[list[str], int, list[dict[str, str]]]:
    """(alert names, longest window in s, expected streams) of the shipped continuous rules."""
    alerts, longest, expected = set(), 0, []
    for group in rules["groups"]:
        for rule in group["rules"]:
            expr = rule.get("expr", "")
            if rule.get("record") == "stream:fioprobe_continuous_expected:info":
                expected.append(dict(rule.get("labels", {})))
            if "continuous" not in group["name"] and "fioprobe_continuous" not in expr:
                continue
            if rule.get("alert", "").startswith("FioProbeContinuous"):
                alerts.add(rule["alert"])
            windows = [int(n) * UNIT[u] for n, u in DURATION.findall(expr)]
            extra = seconds_of(rule.get("for", "")) + seconds_of(rule.get("keep_firing_for", ""))
            longest = max([longest, extra, *windows])
    return sorted(alerts), longest, expected


def rle(values: list[float | None]) -> str:
    """promtool's series notation for one series' samples (None: no sample).

    Values are rounded to 6 decimals first. Integer series (bucket counts) compress runs of
    equal steps as a+bxn, exact in float64; other series (sums, the stall counter) only runs
    of equal values, because promtool's float expansion of a+bxn can step back by 1e-15 at a
    run's end: a counter reset to the rules. The first missing sample after a present one is a
    staleness marker, as Prometheus writes at a failed scrape or a pod that is gone; trailing
    missing samples are left out.
    """
    rounded = [None if v is None else round(v, 6) for v in values]
    while rounded and rounded[-1] is None:
        rounded.pop()
    integer = all(v is None or v == int(v) for v in rounded)
    out, i = [], 0
    while i < len(rounded):
        v = rounded[i]
        if v is None:
            j = i
            while j < len(rounded) and rounded[j] is None:
                j += 1
            missing = j - i
            if i > 0:
                out.append("stale")
                missing -= 1
            if missing:
                out.append(f"_x{missing}")
            i = j
            continue
        j, step = i + 1, None
        while j < len(rounded) and rounded[j] is not None:
            d = rounded[j] - rounded[j - 1]  # type: ignore[operator]
            if not integer and d != 0:
                break
            if step is None:
                step = d
            elif d != step:
                break
            j += 1
        n = j - i - 1
        if n == 0:
            out.append(_num(v))
        else:
            sign = "+" if step >= 0 else "-"  # type: ignore[operator]
            out.append(f"{_num(v)}{sign}{_num(abs(step))}x{n}")  # type: ignore[arg-type]
        i = j
    return " ".join(out)


def _num(x: float) -> str:
    """A number as promtool reads it, without the 6-digit rounding of :g."""
    text = f"{round(x, 6):.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def promtool_test(increments: list[dict[str, float]], workdir: Path) -> dict[str, Any]:
    """Replay the busy hour per 15 s scrape over the rules' longest window; expect no alert."""
    rules = yaml.safe_load(RULES.read_text())
    alerts, longest, expected = continuous_rules(rules)
    if not alerts:
        return {"skipped": f"no FioProbeContinuous* alert in {RULES}"}
    span = longest + 3600  # the longest window full, and an hour more
    steps = int(span // SCRAPE_SECONDS) + 1
    restarts = {steps // 4, steps // 2}  # two restarts: new pod, counters from 0
    gap = set(range(int(steps * 0.8), int(steps * 0.8) + 4))  # a 1-minute scrape gap
    names = sorted(increments[0])
    series_out = []
    for k, labels in enumerate(expected or [{"storageclass": "etcd-disk", "node": "cp-0"}]):
        etcd = "node" in labels
        pods, values = [], []  # per pod, per name: list of values (None = no sample)
        pod = 0
        totals = dict.fromkeys(names, 0.0)
        for step in range(steps):
            if step in restarts:
                pod += 1
                totals = dict.fromkeys(names, 0.0)
            elif step:
                inc = increments[(step + 37 * k) % len(increments)]
                totals = {n: totals[n] + inc[n] for n in names}
            pods.append(pod)
            values.append(None if step in gap else dict(totals))
        base = {"job": "fioprobe-continuous", "namespace": "fioprobe", **labels}
        for p in sorted(set(pods)):
            ident = {
                **base,
                "pod": f"fioprobe-continuous-{k}-{p}",
                "instance": f"10.0.{k}.{p}:9436",
            }
            own = [v if pods[i] == p else None for i, v in enumerate(values)]
            for n in names:
                metric, _, le = n.partition("|")
                ls = {**ident, **({"le": le} if le else {})}
                series_out.append(_series(metric, ls, [None if v is None else v[n] for v in own]))
            present = [None if v is None else 1.0 for v in own]
            zero = [None if v is None else 0.0 for v in own]
            info = {
                **ident,
                "etcd_disk": "true" if etcd else "false",
                "volume_type": "unknown" if etcd else labels["storageclass"],
                "ran_on_node": labels.get("node", "n"),
                "device": "",
                "disk": "",
                "major_minor": "",
                "version": "bench",
            }
            series_out.append(_series("fioprobe_continuous_info", info, present))
            series_out.append(_series("fioprobe_continuous_success", ident, present))
            series_out.append(_series("fioprobe_continuous_inflight_seconds", ident, zero))
    eval_times = sorted(
        {
            600,
            3600,
            (steps // 4 + 2) * 15,
            (steps // 2 + 2) * 15,
            6 * 3600,
            (int(steps * 0.8) + 2) * 15,
            (int(steps * 0.8) + 8) * 15,
            longest,
            (steps - 1) * 15,
        }
    )
    groups = [g["name"] for g in rules["groups"]]
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": SCRAPE,
        "group_eval_order": groups,
        "tests": [
            {
                "name": "continuous: the busy host's measured hour, replayed; restarts and a gap",
                "interval": SCRAPE,
                "input_series": series_out,
                "alert_rule_test": [
                    {"eval_time": f"{t}s", "alertname": a, "exp_alerts": []}
                    for t in eval_times
                    for a in alerts
                ],
                "promql_expr_test": [
                    {
                        "expr": f"max_over_time({ALERTS}[{span}s])",
                        "eval_time": f"{(steps - 1) * 15}s",
                        "exp_samples": [],
                    }
                ],
            }
        ],
    }
    path = workdir / "continuous-busy-host.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 20))
    started = time.monotonic()
    result = subprocess.run(
        ["promtool", "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    return {
        "file": str(path),
        "bytes": path.stat().st_size,
        "alerts": alerts,
        "longest_window_s": longest,
        "span_s": (steps - 1) * 15,
        "streams": len(expected),
        "eval_times_s": eval_times,
        "restarts_at_s": sorted(r * 15 for r in restarts),
        "gap_at_s": min(gap) * 15,
        "returncode": result.returncode,
        "output": (result.stdout + result.stderr)[-3000:],
        "seconds": time.monotonic() - started,
        "rules_sha256": hashlib.sha256(RULES.read_bytes()).hexdigest()[:16],
    }


def _series(name: str, labels: dict[str, str], values: list[float | None]) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": rle(values)}


# --- the run -----------------------------------------------------------------------------------


class Threads:
    """Named threads whose exceptions are kept and raised by `join`."""

    def __init__(self) -> None:
        self.threads: dict[str, threading.Thread] = {}
        self.results: dict[str, Any] = {}
        self.errors: dict[str, BaseException] = {}

    def start(self, name: str, target: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.results[name] = target()
            except BaseException as exc:
                self.errors[name] = exc
                log(f"{name} failed: {exc!r}")

        self.threads[name] = threading.Thread(target=run, name=name, daemon=True)
        self.threads[name].start()

    def join(self, name: str, timeout: float) -> Any:
        self.threads[name].join(timeout)
        if self.threads[name].is_alive():
            raise TimeoutError(f"{name} did not end within {timeout} s")
        if name in self.errors:
            raise self.errors[name]
        return self.results.get(name)


def measure(plan: Plan, seed: int) -> dict[str, Any]:
    loads = [loadavg()]
    began = time.time()
    out: dict[str, Any] = {
        "seed": seed,
        "quick": plan.quick,
        "loadavg_before": loads[0],
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    with contextlib.ExitStack() as stack:
        work = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="fioprobe-stalls-", dir="/var/tmp")
            )
        )
        shm = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="fioprobe-stalls-", dir="/dev/shm")
            )
        )
        gateway = stack.enter_context(_service(services.pushgateway(work / "pushgateway")))
        fss = {}
        for name in ("a", "b", "busy"):
            (shm / name / "backing").mkdir(parents=True)
            (shm / name / "mnt").mkdir()
            fss[name] = stack.enter_context(slow_fs(shm / name / "backing", shm / name / "mnt", 0))
            for sub in ("stream", "probe"):
                (fss[name].mountpoint / sub).mkdir()
        streams = {
            name: stack.enter_context(
                stream(
                    work,
                    f"stream-{name}",
                    "--dir",
                    str(fss[name].mountpoint / "stream"),
                    "--storageclass",
                    f"stall-{name}" if name != "busy" else "busy",
                    "--etcd-disk",
                )
            )
            for name in ("a", "b", "busy")
        }
        targets = {f"stream-{n}": f"127.0.0.1:{s.port}" for n, s in streams.items()}
        targets["pushgateway"] = f"127.0.0.1:{gateway.port}"
        prom = stack.enter_context(
            _service(services.prometheus(work / "prometheus", targets, scrape_interval=SCRAPE))
        )
        loops = {
            n: stack.enter_context(loop_mount(work / f"loop-{n}", LOOP_SIZE, image_dir=work))
            for n in ("one", "four", "probe")
        }
        log(f"loop devices: { {n: lm.device for n, lm in loops.items()} }")
        one = stack.enter_context(
            stream(
                work,
                "stream-one",
                "--dir",
                str(loops["one"].mountpoint),
                "--storageclass",
                "cost-one",
                "--etcd-disk",
            )
        )
        config = work / "four.yaml"
        config.write_text(
            "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets:\n"
            + "".join(
                f"  - {{name: cost-four-{i}, directory: {loops['four'].mountpoint / str(i)},"
                " profiles: [etcd-fsync]}\n"
                for i in range(4)
            )
        )
        for i in range(4):
            (loops["four"].mountpoint / str(i)).mkdir()
        four = stack.enter_context(stream(work, "stream-four", "--config", str(config)))
        # Both CPUs busy for the whole run (item 4; it loads items 1-3 too).
        hogs = busy_loops(2)
        stack.callback(_stop_all, hogs)
        services.wait_for(
            lambda: services.query(prom.url, f'{H}_count{{storageclass="busy"}}'),
            60,
            "Prometheus has the streams",
            1.0,
        )
        busy_start = streams["busy"].samples()
        busy_t0 = time.time()
        stop, stop_watch = threading.Event(), threading.Event()
        disks = [
            Disk(
                n,
                fss[n],
                f"stall-{n}",
                streams[n],
                fss[n].mountpoint / "probe",
                schedule(plan, random.Random(f"{seed}-{n}")),
                random.Random(f"{seed}-{n}-probe").uniform(0, plan.probe_period),
            )
            for n in ("a", "b")
        ]
        threads = Threads()
        for d in disks:
            threads.start(f"stalls-{d.name}", lambda d=d: stall_loop(d, stop))
            threads.start(
                f"probe-{d.name}",
                lambda d=d: probe_loop(d, gateway.url, plan.probe_period, stop_watch),
            )
        every = 5.0 if plan.quick else 30.0
        threads.start(
            "watch-one", lambda: watch_stream(one, loops["one"].device, stop_watch, every)
        )
        threads.start(
            "watch-four", lambda: watch_stream(four, loops["four"].device, stop_watch, every)
        )
        threads.start("loads", lambda: sample_loads(loads, stop_watch))
        threads.start(
            "cost-probe", lambda: probe_cost(loops["probe"], gateway.url, plan.cost_probe_runs)
        )
        expected = max(sum(g + length for g, length in d.plan) for d in disks)
        log(
            f"stall schedules: longest {expected / 60:.1f} min; "
            f"busy host {plan.busy_seconds / 60:.1f} min"
        )
        try:
            for d in disks:
                threads.join(f"stalls-{d.name}", expected + 600)
            stalls_done = time.time()
            time.sleep(SCRAPE_SECONDS * 3)  # the last stall's samples scraped
            out["cost_probe"] = threads.join("cost-probe", 600)
            remaining = busy_t0 + plan.busy_seconds - time.time()
            while remaining > 0:
                time.sleep(min(60.0, remaining))
                remaining = busy_t0 + plan.busy_seconds - time.time()
        finally:
            stop.set()
            stop_watch.set()
        busy_end = streams["busy"].samples()
        busy_t1 = time.time()
        loads.append(loadavg())
        for d in disks:
            threads.join(f"probe-{d.name}", PROBE_TIMEOUT + 30)
        threads.join("loads", 60)
        one_snaps = threads.join("watch-one", 60)
        four_snaps = threads.join("watch-four", 60)
        now = time.time()
        for d in disks:
            samples = stream_samples(prom.url, d.storageclass, now - began, now)
            judged, false_rises = judge(d.stalls, samples, d.runs)
            out.setdefault("stalls", []).extend({**j, "disk": d.name} for j in judged)
            out.setdefault("runs", []).extend({**r, "disk": d.name} for r in d.runs)
            out.setdefault("false_rises", {})[d.name] = false_rises
            out.setdefault("scrapes", {})[d.name] = len(samples)
        out["stalls_seconds"] = stalls_done - busy_t0
        pg_runs = services.query(
            prom.url, 'max by (storageclass) (fioprobe_runs_total{storageclass=~"stall-.*"})'
        )
        out["prometheus_probe_runs"] = {
            r["metric"]["storageclass"]: float(r["value"][1]) for r in pg_runs
        }  # type: ignore[index]
        out["busy"] = {
            "seconds": busy_t1 - busy_t0,
            "start": distribution(busy_start, "busy"),
            "end": distribution(busy_end, "busy"),
            "increments": scrape_increments(prom.url, "busy", busy_t1 - busy_t0, busy_t1),
        }
        out["cost_stream_one"] = summarize_stream(one_snaps, 4 * 1024 * 1024)
        out["cost_stream_four"] = summarize_stream(four_snaps, 4 * 1024 * 1024)
        out["loads"] = loads
        out["loadavg_after"] = loadavg()
    out["wall_seconds"] = time.time() - began
    return out


@contextlib.contextmanager
def _service(service: services.Service) -> Iterator[services.Service]:
    service.start()
    try:
        yield service
    finally:
        service.stop()


def _stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)


# --- analysis and the section ------------------------------------------------------------------


def analyse(out: dict[str, Any], period: float) -> dict[str, Any]:
    runs = [r for r in out["runs"] if r["code"] == 0]
    stalls = out["stalls"]

    def overlaps_any(r: dict[str, float]) -> bool:
        return any(s["start"] < r["end"] and s["end"] + 0.5 > r["start"] for s in stalls)

    healthy = [r["end"] - r["start"] for r in runs if not overlaps_any(r)]
    d = statistics.median(healthy) if healthy else 0.0
    rows = []
    for length in sorted({s["length"] for s in stalls}):
        group = [s for s in stalls if s["length"] == length]
        delays = [s["stream_delay"] for s in group if s["stream_delay"] is not None]
        agree = sum(s["probe_seen"] == s["probe_overlap"] for s in group)
        rows.append(
            {
                "length": length,
                "n": len(group),
                "stream_seen": sum(s["stream_seen"] for s in group),
                "delay_median": statistics.median(delays) if delays else None,
                "delay_p90": quantile(delays, 0.9),
                "delay_max": max(delays) if delays else None,
                "probe_seen": sum(s["probe_seen"] for s in group),
                "probe_by_counts": sum(s["probe_by_counts"] for s in group),
                "probe_by_p99": sum(s["probe_by_p99"] for s in group),
                "probe_overlap": sum(s["probe_overlap"] for s in group),
                "agree": agree,
                "model_measured_period": min(1.0, (d + length) / period),
                "model_cronjob": min(1.0, (d + length) / CRONJOB_PERIOD),
            }
        )
    return {
        "rows": rows,
        "healthy_run_seconds": d,
        "healthy_runs": len(healthy),
        "all_runs": len(out["runs"]),
        "failed_runs": len(out["runs"]) - len(runs),
    }


def pct(a: float, b: float) -> str:
    return f"{a}/{b} ({100 * a / b:.0f} %)" if b else "-"


def mb(x: float) -> str:
    return f"{x / 1e6:,.1f} MB"


def render(out: dict[str, Any], plan: Plan) -> str:
    a = analyse(out, plan.probe_period)
    lines = [HEADING, ""]
    load = out["loads"]
    lines.append(
        f"`bench/continuous_stalls.py{' --quick' if plan.quick else ''} --seed {out['seed']}`, "
        f"{out['started'][:10]}, started {out['started'][11:16]} UTC, "
        f"{out['wall_seconds'] / 60:.0f} "
        f"minutes. Machine: x86_64, 2 cores, {platform.python_implementation()} "
        f"{platform.python_version()}; load average {min(load):.1f} to {max(load):.1f} during the "
        f"run ({out.get('loads_note', '1-minute values sampled each minute')}). In parallel, "
        "for the whole run: two busy "
        "loops (both CPUs busy, item 4), three slow FUSE disks (Python daemons), five stream "
        "processes, the probes, one Prometheus and one Pushgateway: every figure below was "
        "measured on a loaded host."
    )
    lines += ["", "### Stalls seen: the stream and the scheduled probe, side by side", ""]
    lines.append(
        f"Two slow FUSE disks over tmpfs, each with its own stream (`fioprobe continuous`, "
        f"1 s interval) and its own etcd-fsync probe (`fioprobe probe`, every "
        f"{plan.probe_period:g} s, pushing to a real Pushgateway) in sibling directories; one real "
        f"Prometheus scraped both streams and the Pushgateway every {SCRAPE}. Each disk got a "
        f"seeded, shuffled schedule of {plan.per_length_per_disk} stalls of each length, "
        f"{plan.gap[0]:g}-{plan.gap[1]:g} s apart: every fsync/fdatasync +{STALL_DELAY_MS:g} ms "
        f"(`SlowFs.set_delays`) for the stall's length. **Stream seen**: a Prometheus sample after "
        f"the stall began in which the stream's fdatasyncs above 10 ms (`_count` minus "
        f'`le="0.01"`) rose, in a scrape interval overlapping the stall, or the in-flight age '
        f"was >= 1 s; the delay is from the stall's start to that sample's timestamp. **Probe "
        f"seen**: a probe run overlapping the stall pushed fsyncs above 10 ms or a last-run p99 "
        f"above 10 ms (read from the Pushgateway right after each run)."
    )
    lines += [
        "",
        "| stall | n | stream seen | stream delay median / p90 / max (s) | probe "
        f"every {plan.probe_period:g} s: seen (by counts / by p99) | runs overlapping | "
        f"model (D+L)/{plan.probe_period:g} s | probe every 5 min (model) |",
        "|---|---:|---:|---|---|---:|---:|---:|",
    ]
    for r in a["rows"]:
        delays = " / ".join(
            "-" if x is None else f"{x:.1f}"
            for x in (r["delay_median"], r["delay_p90"], r["delay_max"])
        )
        lines.append(
            f"| {r['length']:g} s | {r['n']} | {pct(r['stream_seen'], r['n'])} | {delays} | "
            f"{pct(r['probe_seen'], r['n'])} ({r['probe_by_counts']} / {r['probe_by_p99']}) | "
            f"{r['probe_overlap']} | {100 * r['model_measured_period']:.0f} % | "
            f"{100 * r['model_cronjob']:.1f} % |"
        )
    agree = sum(r["agree"] for r in a["rows"])
    n = sum(r["n"] for r in a["rows"])
    seen = sum(r["probe_seen"] for r in a["rows"])
    predicted = sum(r["n"] * r["model_measured_period"] for r in a["rows"])
    false = sum(out["false_rises"].values())
    loop_d = statistics.median(out["cost_probe"]["run_seconds"])
    scrapes = sum(out["scrapes"].values())
    lines += [
        "",
        f"- The model for the probe: a stall of length L is seen iff a run overlaps it, so with "
        f"runs of D s every T s, P = (D + L) / T (at most 1). D = {a['healthy_run_seconds']:.1f} s "
        f"is the median of the {a['healthy_runs']} measured runs that overlapped no stall. "
        f"Checked on the {plan.probe_period:g}-s data first: 'seen' equalled 'a run overlapped' "
        f"for {agree} of {n} stalls, and the model predicted {predicted:.1f} stalls seen where "
        f"{seen} were. The 5-minute column is the same model with T = 300 s (the shipped "
        f"CronJob schedule), not a measurement. A run lasts longer on a real disk: on the "
        f"ext4 loop device below the probe's runs took a median of {loop_d:.1f} s, which gives "
        + ", ".join(
            f"{100 * min(1.0, (loop_d + r['length']) / CRONJOB_PERIOD):.1f} %" for r in a["rows"]
        )
        + f" for the {len(a['rows'])} stall lengths at 5 minutes.",
        f"- Probe runs: {a['all_runs']}, of which {a['failed_runs']} failed; Prometheus held "
        f"fioprobe_runs_total = "
        + ", ".join(f"{k} {v:g}" for k, v in sorted(out["prometheus_probe_runs"].items()))
        + " from the Pushgateway at the end.",
        f"- Stream false alarms: {false} of {scrapes} scrape intervals showed fdatasyncs above "
        f"10 ms without overlapping a stall (the probe runs on the same FUSE disk, the busy "
        f"loops and the other processes share the two CPUs).",
    ]
    lines += ["", "### Cost: bytes per day", ""]
    cp, one = out["cost_probe"], out["cost_stream_one"]
    app_stream = 86400 / STREAM_INTERVAL * WRITE_SIZE
    app_probe = cp["fio_bytes_per_run"] * RUNS_PER_DAY
    lines.append(
        "At the application: the stream writes ops x 2,300 B x 86,400 / interval; the probe "
        "writes fio's written bytes per run (from its pushed `fioprobe_written_bytes_total`) x "
        "288 runs a day (the shipped 5-minute schedule). At the device: each ran on its own ext4 "
        "on a loop device (256 MiB sparse image in a temp dir); written sectors from "
        "/sys/block/loopN/stat over the period, x 512 B, scaled to a day: the stream for the "
        f"whole run ({one['seconds'] / 60:.0f} min), split into its first pass through its "
        "preallocated 4 MiB file (its writes land in unwritten extents, which ext4 converts "
        "with journal writes of their own: our reading of the higher figure, not measured "
        "apart) and after it wrapped (steady state); "
        f"the probe over {cp['runs']} runs "
        "(after a first run not counted, then syncfs and 6 s for jbd2)."
    )
    lines += [
        "",
        "| per day | stream (1 s) | etcd-fsync probe every 5 min | stream / probe |",
        "|---|---:|---:|---:|",
    ]
    whole = one["whole"]
    ratios = {"application": app_stream / app_probe}
    lines.append(
        f"| application, by the formula | {mb(app_stream)} | {mb(app_probe)} | "
        f"{app_stream / app_probe:.2f} |"
    )
    if whole:
        measured = whole["ops_per_second"] * 86400 * whole["app_bytes_per_op"]
        lines.append(
            f"| application, measured ops ({whole['ops_per_second']:.3f}/s) | "
            f"{mb(measured)} | {mb(app_probe)} | {measured / app_probe:.2f} |"
        )
    dev_probe = cp["device_bytes_per_run"] * RUNS_PER_DAY
    for label, key in (
        ("device, first pass", "first_pass"),
        ("device, after the wrap", "after_wrap"),
        ("device, whole run", "whole"),
    ):
        w = one[key]
        if w:
            dev = w["device_bytes_per_op"] * 86400 / STREAM_INTERVAL
            ratios[label] = dev / dev_probe
            lines.append(
                f"| {label} ({w['seconds'] / 60:.0f} min, {w['device_bytes_per_op'] / 1024:.1f} "
                f"KiB/op) | {mb(dev)} | {mb(dev_probe)} | {dev / dev_probe:.2f} |"
            )
        else:
            lines.append(f"| {label} | not reached in this run | {mb(dev_probe)} | - |")
    lines += [
        "",
        f"Probe per run: fio wrote {cp['fio_bytes_per_run']:,.0f} B, the device "
        f"{cp['device_bytes_per_run']:,.0f} B; run time "
        + ", ".join(f"{x:.1f}" for x in cp["run_seconds"])
        + " s. Target: the stream at most 1/4 of the CronJob's bytes per day, at both levels: "
        + "; ".join(
            f"{label} {r:.2f}, {'met' if r <= 0.25 else '**not met**'}"
            for label, r in ratios.items()
        )
        + ".",
    ]
    lines += ["", "### Memory and CPU of the stream", ""]
    lines.append(
        "Summed PSS (`/proc/<pid>/smaps_rollup`) and CPU (`utime + stime` from "
        "`/proc/<pid>/stat`) of the parent and its writer children, over the whole run, "
        "on the loop-device ext4 (the 4 targets: 4 directories of one filesystem). "
        "Targets: < 40 MiB + 10 MiB per target, < 1 % of a core."
    )
    lines += [
        "",
        "| targets | processes | PSS max / at the end (MiB) | target (MiB) | CPU s "
        "over min | share of a core |",
        "|---:|---:|---|---:|---|---:|",
    ]
    for k, key in ((1, "cost_stream_one"), (4, "cost_stream_four")):
        s = out[key]
        lines.append(
            f"| {k} | {s['processes']} | {s['pss_mib_max']:.1f} / {s['pss_mib_last']:.1f} | "
            f"{40 + 10 * k} | {s['cpu_seconds']:.1f} over {s['seconds'] / 60:.0f} | "
            f"{100 * s['cpu_share']:.2f} % |"
        )
    verdicts = []
    for k, key in ((1, "cost_stream_one"), (4, "cost_stream_four")):
        s = out[key]
        pss_ok = s["pss_mib_max"] < 40 + 10 * k
        cpu_ok = s["cpu_share"] < 0.01
        verdicts.append(
            f"{k} target{'s' if k > 1 else ''}: memory {'met' if pss_ok else '**not met**'}, "
            f"CPU {'met' if cpu_ok else '**not met**'}"
        )
    lines += ["", "Verdict: " + "; ".join(verdicts) + "."]
    lines += ["", "### The healthy busy host, and the alerts over it", ""]
    b = out["busy"]
    start, end = b["start"], b["end"]
    ops = end["count"] - start["count"]
    above = ops - (end[f"le={SLOW_LE}"] - start[f"le={SLOW_LE}"])
    lines.append(
        f"A third slow FUSE disk over tmpfs with no added delay, its stream scraped with the "
        f"others, both CPUs kept busy by two busy-loop processes for {b['seconds'] / 60:.0f} "
        f"minutes (and the rest of this benchmark running). Bucket counts from the stream's "
        f"/metrics at the start and the end: {ops:.0f} fdatasyncs, **{above:.0f} above 10 ms "
        f"({100 * above / ops:.2f} %)**; stall counter +{end['stall'] - start['stall']:.2f} s."
        if ops
        else "The busy host's stream completed no fdatasync."
    )
    lines += ["", "| le (s) | fdatasyncs in the hour | share |", "|---|---:|---:|"]
    prev = 0.0
    for key in [k for k in end if k.startswith("le=")]:
        got = end[key] - start.get(key, 0.0)
        if got - prev:
            lines.append(f"| <= {key[3:]} | {got - prev:.0f} | {100 * (got - prev) / ops:.2f} % |")
        prev = got
    pt = out.get("promtool", {})
    lines.append("")
    if "skipped" in pt:
        lines.append(f"promtool: not run ({pt['skipped']}).")
    elif pt:
        lines.append(
            f"Then `promtool test rules` over {RULES.relative_to(REPO)} (sha256 "
            f"{pt['rules_sha256']}...; alerts {', '.join(pt['alerts'])}): the hour's "
            f"{len(b['increments'])} per-scrape increments of every bucket, `_count`, `_sum` and "
            f"the stall counter, replayed cyclically every 15 s for {pt['span_s'] / 3600:.0f} h "
            f"(the rules' longest window, {pt['longest_window_s'] / 3600:.0f} h, "
            "and an hour more), "
            f"for each of the {pt['streams']} streams the rules expect (etcd-disk streams with "
            f'`etcd_disk="true"`), in-flight 0, two restarts (counters from 0, a new pod '
            f"label) at {', '.join(f'{x / 3600:.1f} h' for x in pt['restarts_at_s'])} and a "
            f"1-minute scrape gap at {pt['gap_at_s'] / 3600:.1f} h. exp_alerts empty for every "
            f"alert at {len(pt['eval_times_s'])} evaluation times ("
            + ", ".join(f"{x / 3600:.2f} h" for x in pt["eval_times_s"])
            + "), and no `ALERTS` sample of a FioProbeContinuous* alert, pending or firing, over "
            f"the whole span: **{'passed' if pt['returncode'] == 0 else 'FAILED'}** "
            f"(promtool exit {pt['returncode']}, {pt['seconds']:.0f} s). The generated file is a "
            f"benchmark artefact, not a repository test: {pt['file']}."
        )
        if pt["returncode"]:
            lines += ["", "```", pt["output"].strip()[-1500:], "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="where to keep the raw results")
    parser.add_argument("--from-json", type=Path, help="re-render (and re-run promtool) only")
    parser.add_argument(
        "--write", action="store_true", help=f"write {HEADING!r} into docs/BENCHMARKS.md"
    )
    args = parser.parse_args()
    if args.from_json:
        out = json.loads(args.from_json.read_text())
    else:
        out = measure(QUICK if args.quick else FULL, args.seed)
    plan = QUICK if out["quick"] else FULL
    workdir = Path(tempfile.gettempdir()) / "continuous_stalls-promtool"
    workdir.mkdir(exist_ok=True)
    out["promtool"] = promtool_test(out["busy"]["increments"], workdir)
    path = args.json or Path(tempfile.gettempdir()) / f"continuous_stalls-{int(time.time())}.json"
    path.write_text(json.dumps(out, indent=1))
    section = render(out, plan)
    print(section)
    print(f"raw results: {path}")
    if args.write:
        write_section(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
