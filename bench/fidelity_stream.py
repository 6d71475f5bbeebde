"""Fidelity of the continuous stream: does `fioprobe continuous` say what etcd's WAL feels?

Why this exists: the stream (docs/CONTINUOUS.md) pages for etcd disks on the claim that a
2,300-byte write + fdatasync once a second sees the latency etcd's WAL sees on the same
filesystem. It samples once a second while etcd syncs many times a second, so on a disk
whose slowness comes in queues (a throttled volume, a noisy neighbour) or in bursts the two
may part. This measures it, with real parts only, on 127.0.0.1:

- real etcd (Debian's etcd-server, `support.services.etcd`) with its data directory on the
  condition's filesystem, driven by a paced, bounded put loop (`PUT_RATE` puts a second of
  `PUT_VALUE_BYTES`-byte values: one WAL append + fdatasync per put);
- `fioprobe continuous` (the stream, default settings) in a sibling directory of the same
  filesystem, and beside it one variant stream (`--variant`, by default `--interval 0.2`);
- one real Prometheus scraping etcd and the streams every 15 s and evaluating the shipped
  rules (alerts/out/rules.yaml) every 15 s over that data.

Each condition first runs etcd alone (`--off-seconds`, its p99 with the stream off), then
starts the streams (`--on-seconds`). Afterwards, from Prometheus only, over sliding 5-minute
windows stepped 15 s (the stream's alert window; a window needs `MIN_STREAM_SAMPLES`
stream samples to be comparable): the fraction of fdatasyncs above 10 ms of each side with
its sample count and a 95 % Wilson interval, p99 where the count supports it, and the
verdict (the objective: 99 % within 10 ms). etcd's histogram has no 10 ms boundary (its
buckets double: 8, 16 ms), so its fraction above 10 ms is known only between its fractions
above 16 and above 8 ms; a window counts as clear of the objective only when that whole
range, with its binomial interval, lies on one side of 1 %.

Conditions (default: all of them, about 8 minutes each; `--conditions` picks some):
disk (the work directory's disk), tmpfs, slowfs-5ms and slowfs-15ms (the slow FUSE disk over
tmpfs), blkio-high and blkio-low (ext4 on a loop device over tmpfs under a cgroup-v1 blkio
IOPS + bandwidth throttle that etcd, the streams and their writers are inside), neighbour
(the loop device at 500 IOPS with a bounded fio random-write job, iodepth 32, in the same
cgroup), stalls (the FUSE disk with +300 ms per fsync for 5 s at seeded random times, judged
by detection: per stall, did etcd record fsyncs above 256 ms, did the stream see it).

    sudo PYTHONPATH=tests:bench .venv/bin/python bench/fidelity_stream.py \
        [--conditions tmpfs,slowfs-15ms] [--off-seconds 60] [--on-seconds 420] \
        [--variant 'interval=0.2'] [--json FILE] [--no-write]

`make fidelity-stream` runs them all (about 70 minutes: 8.7 per condition). Needs root (FUSE
with allow_other, loop devices, cgroups). Every process started is stopped by PID, every
mount, loop device and cgroup removed, also on failure; every wait and loop is bounded. The
results go into their own section of docs/FIDELITY.md. tests/bench/test_fidelity.py runs `measure`
for 30 s on two disks.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import json
import math
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchdoc import write_section
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS
from support import services, throttle
from support.benchdisk import condition_disk
from support.slowfs import SlowFs

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "FIDELITY.md"
HEADING = "## The continuous stream against etcd"
RULES = REPO / "alerts" / "out" / "rules.yaml"

ETCD = "etcd_disk_wal_fsync_duration_seconds"
STREAM = "fioprobe_continuous_sync_latency_seconds"
#: The objective both are judged by: 99 % of fdatasyncs within 10 ms.
OBJECTIVE_SECONDS = ETCD_FSYNC_P99_SECONDS
OBJECTIVE_SHARE = 0.01
#: The stream's alert window and Prometheus's step over it.
WINDOW_SECONDS = 300.0
STEP_SECONDS = 15.0
SCRAPE = "15s"
#: Fewer stream samples than this in a window (about 300 at 1 s): not comparable.
MIN_STREAM_SAMPLES = 200
#: A p99 from fewer samples is the largest few: not reported.
MIN_P99_SAMPLES = 1000
#: 95 % two-sided.
Z = 1.96
PUT_RATE = 100.0
PUT_VALUE_BYTES = 2048
LOOP_SIZE_BYTES = 1024 * 1024 * 1024
STALL_DELAY_MS = 300.0
STALL_SECONDS = 5.0
STALL_GAP_SECONDS = (25.0, 50.0)
#: etcd's bucket boundary that a +300 ms stall crosses and a healthy disk does not.
STALL_LE = 0.256
NEIGHBOUR_IOPS = 500
#: The change tried beside the default stream: five times the samples in each window.
DEFAULT_VARIANT = "interval=0.2"


@dataclass(frozen=True)
class Condition:
    """One disk behaviour; `describe` says it for the table."""

    name: str
    memory: bool = True
    fsync_delay_ms: float | None = None
    write_iops: int | None = None
    write_bps: int | None = None
    neighbour: bool = False
    stalls: bool = False

    @property
    def loop(self) -> bool:
        return self.write_iops is not None

    def describe(self) -> str:
        under = "tmpfs" if self.memory else "the work directory's disk (host ext4, shared)"
        if self.stalls:
            return (
                f"slowfs over {under}, +{STALL_DELAY_MS:g} ms per fsync for "
                f"{STALL_SECONDS:g} s at random times"
            )
        if self.fsync_delay_ms is not None:
            return f"slowfs (FUSE) over {under}, +{self.fsync_delay_ms:g} ms per fsync"
        if self.loop:
            bps = f", {self.write_bps // (1024 * 1024)} MiB/s" if self.write_bps else ""
            text = f"ext4 on a loop device over {under}, blkio {self.write_iops} write IOPS{bps}"
            if self.neighbour:
                text += ", fio randwrite iodepth 32 beside etcd"
            return text
        return f"directory on {under}"


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("disk", memory=False),
        Condition("tmpfs"),
        Condition("slowfs-5ms", fsync_delay_ms=5),
        Condition("slowfs-15ms", fsync_delay_ms=15),
        Condition("blkio-high", write_iops=300, write_bps=8 * 1024 * 1024),
        Condition("blkio-low", write_iops=100, write_bps=2 * 1024 * 1024),
        Condition("neighbour", write_iops=NEIGHBOUR_IOPS, neighbour=True),
        Condition("stalls", fsync_delay_ms=0, stalls=True),
    )
}


# --- statistics ------------------------------------------------------------------------------


def wilson(k: float, n: float) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial share k/n (0..1 for n = 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denominator = 1 + Z * Z / n
    centre = (p + Z * Z / (2 * n)) / denominator
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """histogram_quantile's interpolation over cumulative {le: count} (None: no samples)."""
    total = buckets.get(math.inf, 0.0)
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le in sorted(buckets):
        count = buckets[le]
        if count >= rank:
            if math.isinf(le):
                return lower
            width = count - below
            return lower + (le - lower) * ((rank - below) / width if width else 1.0)
        lower, below = le, count
    return None


@dataclass
class Side:
    """One histogram over one window: its count and its share above 10 ms (bounds)."""

    n: float
    #: Share above 10 ms: exact for the stream (lo == hi), bounded by 8/16 ms for etcd.
    above_lo: float
    above_hi: float
    p99: float | None

    @classmethod
    def of(cls, buckets: dict[float, float]) -> Side:
        n = buckets.get(math.inf, 0.0)
        if n <= 0:
            return cls(0.0, 0.0, 0.0, None)
        if OBJECTIVE_SECONDS in buckets:
            lo = hi = 1 - buckets[OBJECTIVE_SECONDS] / n
        else:
            below = [le for le in buckets if le < OBJECTIVE_SECONDS]
            above = [le for le in buckets if le > OBJECTIVE_SECONDS]
            hi = 1 - buckets[max(below)] / n if below else 1.0
            lo = 1 - buckets[min(above)] / n
        p99 = quantile(buckets, 0.99) if n >= MIN_P99_SAMPLES else None
        return cls(n, lo, hi, p99)

    @property
    def interval(self) -> tuple[float, float]:
        """95 % interval of the share above 10 ms, bounds included."""
        return wilson(self.above_lo * self.n, self.n)[0], wilson(self.above_hi * self.n, self.n)[1]

    @property
    def met(self) -> bool | None:
        """The objective (at most 1 % above 10 ms) met, missed, or None (bounds straddle it)."""
        if self.n <= 0:
            return None
        if self.above_hi <= OBJECTIVE_SHARE:
            return True
        if self.above_lo > OBJECTIVE_SHARE:
            return False
        return None

    @property
    def clear(self) -> bool:
        """The whole interval on one side of the objective."""
        low, high = self.interval
        return self.n > 0 and (high <= OBJECTIVE_SHARE or low > OBJECTIVE_SHARE)


# --- PromQL ----------------------------------------------------------------------------------


def buckets_between(
    prom: str, metric: str, selector: str, start: float, end: float
) -> dict[float, float]:
    """{le: count increase} over (start, end], exact (difference of the two ends' values;
    a series younger than `start` counts from zero)."""
    at_end = f"sum by (le) ({metric}_bucket{{{selector}}} @ {end:.3f})"
    at_start = f"sum by (le) ({metric}_bucket{{{selector}}} @ {start:.3f})"
    result = services.query(prom, f"(({at_end} - {at_start}) or {at_end})", at=end)
    return {float(s["metric"]["le"]): float(s["value"][1]) for s in result}


def scalar(prom: str, promql: str, at: float | None = None) -> float | None:
    result = services.query(prom, promql, at=at)
    return float(result[0]["value"][1]) if result else None


def raw(prom: str, promql: str, start: float, end: float) -> list[tuple[float, float]]:
    """One series between two instants at a 1 s resolution (a subquery): a value changes at
    the first second after the scrape that brought it."""
    seconds = max(1, math.ceil(end - start))
    result = services.query(prom, f"({promql})[{seconds}s:1s] @ {end:.3f}", at=end)
    if not result:
        return []
    return [(float(t), float(v)) for t, v in result[0]["values"]]


# --- processes ---------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM its process group (its own session), then SIGKILL: nothing is left behind."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and its live children (the stream and its writers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


@dataclass
class Stream:
    """One `fioprobe continuous` process (own session, stopped by PID)."""

    name: str
    args: list[str]
    port: int = field(default_factory=services.free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, directory: Path, prefix: list[str], logdir: Path) -> None:
        directory.mkdir(exist_ok=True)
        with (logdir / f"stream-{self.name}.log").open("ab") as err:
            self.process = subprocess.Popen(
                [*prefix, sys.executable, "-m", "fioprobe", "continuous",
                 f"--dir={directory}", f"--storageclass={self.name}", "--etcd-disk",
                 f"--listen=127.0.0.1:{self.port}", *self.args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True,
            )  # fmt: skip

        def up() -> bool:
            try:
                return bool(services.scrape(f"http://{self.target}/metrics", 1.0))
            except OSError:
                return False

        services.wait_for(up, 30, f"stream {self.name} serves /metrics", 0.2)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def variant_args(spec: str) -> list[str]:
    """'interval=0.2,write-size=4096' -> ['--interval=0.2', '--write-size=4096']."""
    return [f"--{item.strip()}" for item in spec.split(",") if item.strip()]


# --- disks -----------------------------------------------------------------------------------


@dataclass
class Disk:
    root: Path
    prefix: list[str] = field(default_factory=list)
    throttled: throttle.ThrottledMount | None = None
    fs: SlowFs | None = None


@contextlib.contextmanager
def disk_for(condition: Condition, workdir: Path) -> Iterator[Disk]:
    """The condition's filesystem (limits not set yet: etcd starts unthrottled); undone on exit."""
    with condition_disk(
        workdir,
        memory=condition.memory,
        fsync_delay_ms=condition.fsync_delay_ms,
        loop_size_bytes=LOOP_SIZE_BYTES if condition.loop else None,
    ) as made:
        disk = Disk(made.root, made.prefix, made.throttled, made.fs)
        (disk.root / "etcd").mkdir(mode=0o700)
        yield disk


def neighbour_command(disk: Disk, seconds: float) -> list[str]:
    """A bounded fio random-write job with a deep queue, inside the disk's cgroup."""
    return [
        *disk.prefix, "fio", "--name=neighbour", f"--directory={disk.root / 'neighbour'}",
        "--rw=randwrite", "--bs=4k", "--size=256m", "--ioengine=libaio", "--iodepth=32",
        "--direct=1", "--time_based", f"--runtime={math.ceil(seconds)}", "--output=/dev/null",
    ]  # fmt: skip


# --- one condition -------------------------------------------------------------------------


@dataclass
class Window:
    end: float
    etcd: Side
    streams: dict[str, Side]


@dataclass
class Stall:
    start: float
    end: float
    etcd_above_256ms: float = 0.0
    stream_seen: dict[str, float | None] = field(default_factory=dict)
    alert_seen: dict[str, float | None] = field(default_factory=dict)
    #: The Stall alert was already firing when the stall began (it keeps firing for 2
    #: minutes after its last evaluation true): this stall cannot be told to have raised it.
    alert_held: dict[str, bool] = field(default_factory=dict)


@dataclass
class Result:
    condition: str
    description: str
    started: float
    off: tuple[float, float]
    on: tuple[float, float]
    windows: list[Window]
    whole: Window
    etcd_off: Side
    etcd_on: Side
    stream_cpu_seconds: dict[str, float]
    stream_written_bytes: dict[str, float]
    stream_operations: dict[str, float]
    wal_bytes_per_fsync: float | None
    alerts: dict[str, list[str]]
    etcd_p99_windows_above: int
    puts: int
    put_errors: int
    stalls: list[Stall]
    false_detections: dict[str, int]
    etcd_false: int
    loadavg: tuple[float, float]
    streams: dict[str, list[str]]


def measure(
    condition: Condition,
    workdir: Path,
    *,
    streams: dict[str, list[str]],
    off_seconds: float,
    on_seconds: float,
    window_seconds: float = WINDOW_SECONDS,
    step_seconds: float = STEP_SECONDS,
    scrape: str = SCRAPE,
    rules: bool = True,
    seed: int = 1,
) -> Result:
    """Run etcd, its load and the streams on one condition; everything read from Prometheus.

    Bounded: the phases are fixed lengths, every start and wait has a timeout, and the exit
    stack stops every process by PID and undoes every mount, loop device and cgroup.
    """
    loadavg_before = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(disk_for(condition, workdir))
        etcd = services.etcd(workdir / "etcd-run", disk.root / "etcd")
        etcd.command = [*disk.prefix, *etcd.command]
        stack.callback(etcd.stop)
        etcd.start(timeout=60)
        handles = [Stream(name, args) for name, args in streams.items()]
        for handle in handles:
            stack.callback(handle.stop)
        targets = {"etcd": f"127.0.0.1:{etcd.port}"} | {h.name: h.target for h in handles}
        prometheus = services.prometheus(
            workdir / "prometheus", targets, scrape_interval=scrape, evaluation_interval=scrape,
            rule_files=[RULES] if rules else None,
        )  # fmt: skip
        stack.callback(prometheus.stop)
        prometheus.start(timeout=60)
        prom = prometheus.url
        if disk.throttled is not None:
            assert etcd.process is not None
            assert etcd.process.pid in disk.throttled.cgroup.pids(), "etcd is not in the cgroup"
            disk.throttled.set_limits(
                write_iops=condition.write_iops, write_bps=condition.write_bps
            )
        total = off_seconds + on_seconds
        load = services.EtcdWriteLoad(
            etcd.url, rate=PUT_RATE, max_seconds=total + 120, value_bytes=PUT_VALUE_BYTES,
            key_prefix="fidelity-stream/", keys=100,
        ).start()  # fmt: skip
        stack.callback(load.stop)
        if condition.neighbour:
            (disk.root / "neighbour").mkdir()
            with (workdir / "neighbour.log").open("wb") as out:
                fio = subprocess.Popen(
                    neighbour_command(disk, total + 60), stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
            stack.callback(stop_process, fio)
        services.wait_for(
            lambda: (scalar(prom, f"{ETCD}_count") or 0) > 0,
            90,
            "etcd's WAL fsyncs in Prometheus",
            1,
        )
        t_off = time.time()
        log(f"{condition.name}: etcd alone for {off_seconds:g} s")
        time.sleep(off_seconds)
        t_off_end = time.time()
        for handle in handles:
            handle.start(disk.root / f"stream-{handle.name}", disk.prefix, workdir)
        # The streams' windows begin once they serve (their set-up writes are not measured).
        t_on = time.time()
        cpu0 = {h.name: cpu_seconds(h.process.pid) for h in handles if h.process}
        log(f"{condition.name}: streams {', '.join(streams)} on for {on_seconds:g} s")
        stalls: list[Stall] = []
        stop = threading.Event()
        stack.callback(stop.set)
        if condition.stalls and disk.fs is not None:
            thread = threading.Thread(
                target=stall_loop, args=(disk.fs, t_on + on_seconds - 45, stalls, stop, seed),
                daemon=True,
            )  # fmt: skip
            thread.start()
        # Two scrapes after the last stall or sample: the window's end is in Prometheus.
        time.sleep(on_seconds)
        stop.set()
        cpu = {h.name: cpu_seconds(h.process.pid) - cpu0[h.name] for h in handles if h.process}
        t_end = time.time()
        scrape_s = float(scrape.rstrip("s"))
        time.sleep(scrape_s + 2)
        load.stop()
        for handle in handles:
            if handle.process is None or handle.process.poll() is not None:
                raise services.ServiceError(f"stream {handle.name} exited early")
        off, on = (t_off, t_off_end), (t_on, t_end)
        return analyse(
            condition, prom, streams, off, on, window_seconds, step_seconds, scrape_s, cpu,
            stalls, load, loadavg_before,
        )  # fmt: skip
    raise AssertionError("unreachable")  # pragma: no cover


def stall_loop(
    fs: SlowFs, last_start: float, stalls: list[Stall], stop: threading.Event, seed: int
) -> None:
    """+300 ms per fsync for 5 s, seeded random gaps; the last one starts before `last_start`."""
    rng = random.Random(seed)
    for _ in range(100):  # bounded; the time limit ends it long before
        if stop.wait(rng.uniform(*STALL_GAP_SECONDS)) or time.time() > last_start:
            return
        fs.set_delays(fsync_delay_ms=STALL_DELAY_MS, settle_s=0)
        began = time.time()
        try:
            stop.wait(STALL_SECONDS)
        finally:
            fs.set_delays(fsync_delay_ms=0, settle_s=0)
        stalls.append(Stall(began, time.time()))


def analyse(
    condition: Condition,
    prom: str,
    streams: dict[str, list[str]],
    off: tuple[float, float],
    on: tuple[float, float],
    window_seconds: float,
    step_seconds: float,
    scrape_s: float,
    cpu: dict[str, float],
    stalls: list[Stall],
    load: services.EtcdWriteLoad,
    loadavg_before: float,
) -> Result:
    """Everything the tables show, from Prometheus over the finished run."""

    def window(start: float, end: float) -> Window:
        return Window(
            end,
            Side.of(buckets_between(prom, ETCD, "", start, end)),
            {
                s: Side.of(buckets_between(prom, STREAM, f'storageclass="{s}"', start, end))
                for s in streams
            },
        )

    t_on, t_end = on
    windows = []
    end = t_on + window_seconds
    for _ in range(10_000):
        if end > t_end + 0.5:
            break
        windows.append(window(end - window_seconds, end))
        end += step_seconds

    def counter(name: str, s: str) -> float:
        return scalar(prom, f'sum({name}{{storageclass="{s}"}} @ {t_end:.3f})', t_end) or 0.0

    fsyncs = scalar(prom, f"increase({ETCD}_count[{int(t_end - t_on)}s] @ {t_end:.3f})", t_end)
    wal_bytes = scalar(
        prom,
        f"increase(etcd_disk_wal_write_bytes_total[{int(t_end - t_on)}s] @ {t_end:.3f})",
        t_end,
    )
    # Firing alerts at any evaluation of the on phase (and a scrape after it), by name.
    seconds = int(t_end - t_on + scrape_s)
    fired = services.query(
        prom,
        f'max_over_time(ALERTS{{alertname=~"FioProbeContinuous.*", alertstate="firing"}}'
        f"[{seconds}s] @ {t_end + scrape_s:.3f})",
        at=t_end + scrape_s,
    )
    alerts: dict[str, list[str]] = {s: [] for s in streams}
    for series in fired:
        labels = series["metric"]
        alerts.setdefault(labels.get("storageclass", "?"), []).append(labels.get("alertname", "?"))
    false_detections: dict[str, int] = {}
    etcd_false = 0
    if condition.stalls:
        etcd_false = judge_stalls(prom, streams, stalls, on, scrape_s, false_detections)
    puts = len(load.latencies)
    return Result(
        condition=condition.name,
        description=condition.describe(),
        started=off[0],
        off=off,
        on=on,
        windows=windows,
        whole=window(t_on, t_end),
        etcd_off=Side.of(buckets_between(prom, ETCD, "", *off)),
        etcd_on=Side.of(buckets_between(prom, ETCD, "", t_on, t_end)),
        stream_cpu_seconds=cpu,
        stream_written_bytes={
            s: counter("fioprobe_continuous_written_bytes_total", s) for s in streams
        },
        stream_operations={s: counter("fioprobe_continuous_operations_total", s) for s in streams},
        wal_bytes_per_fsync=(wal_bytes / fsyncs) if wal_bytes and fsyncs else None,
        alerts={s: sorted(set(a)) for s, a in alerts.items()},
        etcd_p99_windows_above=sum(
            1 for w in windows if w.etcd.p99 is not None and w.etcd.p99 > OBJECTIVE_SECONDS
        ),
        puts=puts,
        put_errors=len(load.errors),
        stalls=stalls,
        false_detections=false_detections,
        etcd_false=etcd_false,
        loadavg=(loadavg_before, os.getloadavg()[0]),
        streams=streams,
    )


def judge_stalls(
    prom: str,
    streams: dict[str, list[str]],
    stalls: list[Stall],
    on: tuple[float, float],
    scrape_s: float,
    false_detections: dict[str, int],
) -> int:
    """Per stall: etcd's fsyncs above 256 ms, and when (s after its start) each stream's
    samples first showed it (fdatasyncs above 10 ms rose, or an operation in flight for
    250 ms or more) and its Stall alert first fired. Returns etcd's rises outside stalls and
    fills `false_detections` with the streams' (scrape intervals not touching a stall)."""
    t_on, t_end = on
    le = f'le="{STALL_LE}"'
    etcd_slow = raw(prom, f"sum({ETCD}_count) - sum({ETCD}_bucket{{{le}}})", t_on, t_end + scrape_s)
    near = [(s.start - 1, s.end + scrape_s + 1) for s in stalls]

    def rises(samples: list[tuple[float, float]]) -> list[float]:
        return [b[0] for a, b in itertools.pairwise(samples) if b[1] > a[1]]

    def touches(t: float) -> bool:
        # The scrape interval ending at t overlaps a stall.
        return any(t - scrape_s - 1 <= e and t >= s for s, e in near)

    for stall in stalls:
        before = [v for t, v in etcd_slow if t <= stall.start]
        after = [v for t, v in etcd_slow if t <= stall.end + scrape_s + 1]
        stall.etcd_above_256ms = (after[-1] - before[-1]) if before and after else 0.0
    etcd_false = sum(1 for t in rises(etcd_slow) if not touches(t))
    for s in streams:
        sel = f'storageclass="{s}"'
        slow = raw(
            prom,
            f'sum({STREAM}_count{{{sel}}}) - sum({STREAM}_bucket{{{sel}, le="0.01"}})',
            t_on,
            t_end + scrape_s,
        )
        inflight = raw(
            prom, f"max(fioprobe_continuous_inflight_seconds{{{sel}}})", t_on, t_end + scrape_s
        )
        seen = sorted(set(rises(slow)) | {t for t, v in inflight if v >= 0.25})
        firing = f'ALERTS{{alertname="FioProbeContinuousStall", alertstate="firing", {sel}}}'
        alert = [t for t, v in raw(prom, f"max({firing})", t_on, t_end + scrape_s) if v > 0]
        for stall in stalls:
            hit = [t for t in seen if stall.start - 1 <= t <= stall.end + scrape_s + 1]
            stall.stream_seen[s] = (hit[0] - stall.start) if hit else None
            fired = [t for t in alert if stall.start <= t <= stall.end + 4 * scrape_s + 1]
            stall.alert_held[s] = any(stall.start - 1.5 <= t < stall.start for t in alert)
            stall.alert_seen[s] = (fired[0] - stall.start) if fired else None
        false_detections[s] = sum(1 for t in seen if not touches(t))
    return etcd_false


# --- report ------------------------------------------------------------------------------------


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


def ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1000:.1f}"


def verdict(side: Side) -> str:
    met = side.met
    return "?" if met is None else ("met" if met else "**missed**")


def share(side: Side) -> str:
    """'2.3% (n 300, 1.1-4.7%)'; etcd's as its 8-16 ms bounds."""
    low, high = side.interval
    lo, hi = pct(side.above_lo), pct(side.above_hi)
    value = lo if lo == hi else f"{lo}-{hi}"
    return f"{value} (n {side.n:.0f}, {pct(low)}-{pct(high)})"


@dataclass
class Agreement:
    comparable: int
    clear: int
    agree: int
    total: int

    @property
    def rate(self) -> float | None:
        return self.agree / self.clear if self.clear else None


def agreement(result: Result, stream: str) -> Agreement:
    """Windows with enough stream samples; of those with etcd clear, how many verdicts agree."""
    comparable = [w for w in result.windows if w.streams[stream].n >= MIN_STREAM_SAMPLES]
    clear = [w for w in comparable if w.etcd.clear and w.etcd.met is not None]
    agree = [w for w in clear if w.streams[stream].met == w.etcd.met]
    return Agreement(len(comparable), len(clear), len(agree), len(result.windows))


def render(results: list[Result], header: str, heading: str = HEADING) -> str:
    lines = [
        heading,
        "",
        header,
        "",
        "Per condition and stream: windows are 5 minutes long, stepped 15 s, over the time the "
        "streams ran; *comparable* = at least "
        f"{MIN_STREAM_SAMPLES} stream samples; *clear* = etcd's share above 10 ms, with its "
        "95 % interval and its 8/16 ms bucket bounds, wholly on one side of 1 %. The shares are "
        "the median window's; *whole* is one window over the whole time the streams ran.",
        "",
        "| condition | stream | windows comparable / clear / agree | "
        "etcd > 10 ms (median window) | stream > 10 ms (median window) | etcd p99 ms | "
        "stream p99 ms | verdicts etcd / stream (median) | whole: etcd / stream > 10 ms | "
        "whole verdicts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for s in r.streams:
            a = agreement(r, s)
            mid = r.windows[len(r.windows) // 2] if r.windows else None
            rate = "" if a.rate is None else f" ({a.rate * 100:.0f} %)"
            whole_s = r.whole.streams[s]
            lines.append(
                f"| {r.condition} | `{' '.join(r.streams[s]) or 'defaults'}` | "
                f"{a.comparable} of {a.total} / {a.clear} / {a.agree}{rate} | "
                + (
                    f"{share(mid.etcd)} | {share(mid.streams[s])} | {ms(mid.etcd.p99)} | "
                    f"{ms(mid.streams[s].p99)} | {verdict(mid.etcd)} / {verdict(mid.streams[s])} | "
                    if mid
                    else "n/a | n/a | n/a | n/a | n/a | "
                )
                + f"{share(r.whole.etcd)} / {share(whole_s)} | "
                f"{verdict(r.whole.etcd)} / {verdict(whole_s)} |"
            )
    lines += [
        "",
        "| condition | disk | etcd p99 ms stream off / on | etcd > 10 ms off / on | "
        "puts (errors) | WAL bytes per fsync | stream CPU (% of a core) | "
        "stream writes (ops, bytes/day) | "
        "alerts fired (stream) | windows with etcd p99 > 10 ms | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        on_s = r.on[1] - r.on[0]
        cost = "; ".join(
            f"{s}: {r.stream_cpu_seconds.get(s, 0) / on_s * 100:.1f} %" for s in r.streams
        )
        writes = "; ".join(
            f"{s}: {r.stream_operations[s]:.0f}, "
            f"{r.stream_written_bytes[s] / on_s * 86400 / 1e6:.0f} MB"
            for s in r.streams
        )
        alerts = "; ".join(f"{s}: {', '.join(a) or 'none'}" for s, a in r.alerts.items())
        wal = "n/a" if r.wal_bytes_per_fsync is None else f"{r.wal_bytes_per_fsync:.0f}"
        lines.append(
            f"| {r.condition} | {r.description} | {ms(r.etcd_off.p99)} / {ms(r.etcd_on.p99)} | "
            f"{share(r.etcd_off)} / {share(r.etcd_on)} | {r.puts} ({r.put_errors}) | {wal} | "
            f"{cost} | "
            f"{writes} | {alerts} | {r.etcd_p99_windows_above} of {len(r.windows)} | "
            f"{r.loadavg[0]:.1f} -> {r.loadavg[1]:.1f} |"
        )
    stalled = [r for r in results if r.stalls]
    for r in stalled:
        lines += [
            "",
            f"Stalls ({r.condition}): +{STALL_DELAY_MS:g} ms per fsync for {STALL_SECONDS:g} s; "
            "*seen* = a 15 s sample of the stream showed fdatasyncs above 10 ms rise or an "
            "operation in flight for 250 ms or more (s after the stall began); *alert* = "
            "FioProbeContinuousStall firing (*held*: it was still firing from an earlier "
            "stall, kept for 2 minutes).",
            "",
            "| stall | start (s into the streams) | etcd fsyncs > 256 ms | "
            + " | ".join(f"{s} seen after s | {s} alert after s" for s in r.streams)
            + " |",
            "|---|---|---|" + "---|---|" * len(r.streams),
        ]
        for i, st in enumerate(r.stalls, 1):
            cells = " | ".join(
                f"{_sec(st.stream_seen.get(s))} | "
                + ("held" if st.alert_held.get(s) else _sec(st.alert_seen.get(s)))
                for s in r.streams
            )
            lines.append(
                f"| {i} | {st.start - r.on[0]:.0f} | {st.etcd_above_256ms:.0f} | {cells} |"
            )
        recorded = [st for st in r.stalls if st.etcd_above_256ms > 0]
        for s in r.streams:
            seen = sum(1 for st in recorded if st.stream_seen.get(s) is not None)
            alerted = sum(
                1
                for st in recorded
                if st.alert_seen.get(s) is not None and not st.alert_held.get(s)
            )
            held = sum(1 for st in recorded if st.alert_held.get(s))
            lines.append(
                f"\n{s}: of {len(recorded)} stalls etcd recorded above 256 ms, seen {seen}, "
                f"missed {len(recorded) - seen}, Stall alert raised by {alerted} (already "
                f"firing at {held}); false detections "
                f"{r.false_detections.get(s, 0)} (etcd's own rises outside stalls: {r.etcd_false})."
            )
    return "\n".join(lines)


def _sec(x: float | None) -> str:
    return "missed" if x is None else f"{x:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated")
    parser.add_argument("--off-seconds", type=float, default=60.0, help="etcd alone (default 60)")
    parser.add_argument(
        "--on-seconds",
        type=float,
        default=420.0,
        help="with the streams (default 420; >= 300 for a window)",
    )
    parser.add_argument(
        "--variant", default=DEFAULT_VARIANT,
        help="a second stream's options beside the default one ('' for none), e.g. interval=0.2",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="the stalls' schedule")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {DOC.name}")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.conditions.split(",") if n.strip()]
    if unknown := [n for n in names if n not in CONDITIONS]:
        parser.error(f"unknown conditions {unknown}; known: {', '.join(CONDITIONS)}")
    if os.geteuid() != 0:
        parser.error("needs root (FUSE mounts, loop devices, cgroups)")
    streams: dict[str, list[str]] = {"default": []}
    if args.variant:
        streams["variant"] = variant_args(args.variant)
    began = time.time()
    results: list[Result] = []
    failed: list[str] = []
    for name in names:
        # The default temporary directory: the work directory's disk (condition "disk").
        with tempfile.TemporaryDirectory(prefix=f"fidelity-stream-{name}-") as tmp:
            try:
                result = measure(
                    CONDITIONS[name],
                    Path(tmp),
                    streams=streams,
                    off_seconds=args.off_seconds,
                    on_seconds=args.on_seconds,
                    seed=args.seed,
                )
                results.append(result)
                log(f"{name}: done")
            except (OSError, RuntimeError, TimeoutError, services.ServiceError) as exc:
                log(f"{name}: not measured: {exc}")
                failed.append(f"{name} ({str(exc)[:200]})")
    elapsed = time.time() - began
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(began))} by "
        f"`bench/fidelity_stream.py --conditions {','.join(names)} "
        f"--off-seconds {args.off_seconds:g} --on-seconds {args.on_seconds:g} "
        f"--variant '{args.variant}'` in {elapsed:.0f} s on "
        f"{platform.node() or 'this machine'} ({os.cpu_count()} CPUs, "
        f"kernel {platform.release()}); "
        f"etcd {PUT_RATE:g} puts/s of {PUT_VALUE_BYTES} bytes, one client."
    )
    if failed:
        header += "\n\nNot measured: " + "; ".join(failed)
    # A subset writes a section of its own, so that it never replaces the whole run's.
    heading = HEADING if names == list(CONDITIONS) else f"{HEADING}: {', '.join(names)}"
    if args.variant != DEFAULT_VARIANT:
        heading += f" (variant {args.variant or 'none'})"
    text = render(results, header, heading)
    print(text)
    if not args.no_write:
        write_section(text, DOC)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1, default=str))
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
