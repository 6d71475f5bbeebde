"""Fidelity: does the etcd-fsync probe predict what etcd itself sees on the same disk?

Why this exists: the probe's whole claim is "etcd's WAL fsync p99 on this disk is (not)
above 10 ms", said by a 4 MiB fio job instead of by etcd. That claim is measured here, not
assumed. For each condition (a disk with known behaviour) this runs, at the same time and
on the same filesystem:

- real etcd (``support.services.etcd``) with its data directory on the disk, driven by a
  paced, bounded put loop through its v3 HTTP gateway (sequential puts of ~2 KiB values:
  one WAL append + fdatasync per put, the record size of the probe's bs=2300);
- the etcd-fsync probe, run back to back with ``fioprobe probe`` (the CLI a CronJob runs)
  in a sibling directory, pushing its cumulative histogram to a real Pushgateway;
- one real Prometheus scraping etcd's ``/metrics`` and the Pushgateway every second.

Then, from Prometheus only, over the same window: etcd's p99 from
``etcd_disk_wal_fsync_duration_seconds`` and the probe's p99 from the pushed
``fioprobe_sync_latency_seconds``, both as ``histogram_quantile(0.99, <bucket increase>)``
where the increase is the exact difference of the cumulative buckets between the window's
ends (``increase()`` without its extrapolation, which only scales all buckets by one factor
and so cannot change a quantile). The probe's p99 is also computed after 1, 2, 3... runs,
to tell how many runs it takes for its verdict (above 10 ms or not) to agree with etcd's.

Conditions: a plain directory on the host disk; the FUSE filesystem of fioprobe/demo/slowdisk.py
adding 2, 5, 10 and 15 ms after every fsync/fdatasync; an ext4 loop device throttled by a
cgroup-v1 blkio group (tests/support/throttle.py), with etcd *and* the probe inside the
group (fdatasync writes back in the caller's context, so both are throttled).

    PYTHONPATH=tests .venv/bin/python bench/fidelity.py [--runs 5] [--conditions plain,slowfs-15ms]
        [--solo-seconds 10] [--max-seconds 1500] [--output docs/FIDELITY.md] [--json FILE]

Needs root (FUSE mounts with allow_other, loop devices, cgroups). Everything it starts is
stopped by PID, everything it mounts is unmounted, and the whole run is bounded in time.
The table goes into docs/FIDELITY.md between its table markers; the prose around it is
kept. tests/bench/test_fidelity.py imports `measure` from here for its fast version.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS
from support import services, throttle
from support.benchdisk import condition_disk

REPO = Path(__file__).resolve().parents[1]

#: etcd p99 inside this band is "too close to call" for the acceptance rule.
AMBIGUOUS_BAND = (0.008, 0.012)
QUANTILE = 0.99
ETCD_METRIC = "etcd_disk_wal_fsync_duration_seconds"
PROBE_METRIC = "fioprobe_sync_latency_seconds"
PROFILE = "etcd-fsync"
#: etcd put load: at most this many puts per second, ~2 KiB values (WAL record ~ bs=2300).
PUT_RATE = 100.0
#: The shortest measuring window. The probe's runs on tmpfs take about 2 s; at 100 puts a
#: second, read from 1-second scrapes at both ends, such a window holds 100 to 200 etcd
#: fsyncs: too few for a p99 (and at the test's floor of 100).
MIN_WINDOW_SECONDS = 5.0
PUT_VALUE_BYTES = 2048
#: A probe run is budgeted 20 s (jobs/etcd-fsync.fio); this bounds one CLI call.
PROBE_TIMEOUT_SECONDS = 90.0
LOOP_SIZE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Condition:
    """One disk behaviour: plain, slowfs with an fsync delay, or a blkio IOPS limit."""

    name: str
    fsync_delay_ms: float | None = None
    write_iops: int | None = None
    #: Backing storage in memory (tmpfs), where fdatasync costs nothing: the injected
    #: delay or throttle is then the only latency, so the true answer is known. Without
    #: it, the host's shared virtio disk (and everybody's IO on it) is part of the result.
    memory: bool = False

    def describe(self) -> str:
        """A human description for the table (what the disk does)."""
        under = "tmpfs" if self.memory else "the host ext4"
        if self.fsync_delay_ms is not None:
            return f"slowfs (FUSE) over {under}, +{self.fsync_delay_ms:g} ms per fsync"
        if self.write_iops is not None:
            return (
                f"ext4 on a loop device over {under}, blkio {self.write_iops} write IOPS, "
                "etcd and probe in the cgroup"
            )
        if self.memory:
            return "directory on tmpfs (fdatasync is free: CPU and scheduling only)"
        return "plain directory on the host ext4 (shared virtio disk)"


CONDITIONS: dict[str, Condition] = {
    c.name: c
    for c in (
        Condition("plain"),
        Condition("tmpfs", memory=True),
        Condition("slowfs-2ms", fsync_delay_ms=2, memory=True),
        Condition("slowfs-5ms", fsync_delay_ms=5, memory=True),
        Condition("slowfs-10ms", fsync_delay_ms=10, memory=True),
        Condition("slowfs-15ms", fsync_delay_ms=15, memory=True),
        Condition("blkio-100iops", write_iops=100, memory=True),
    )
}


@dataclass
class Disk:
    """Where etcd and the probe write, and the argv prefix that puts a process on it."""

    etcd_dir: Path
    probe_dir: Path
    prefix: list[str] = field(default_factory=list)
    throttled: throttle.ThrottledMount | None = None


@contextlib.contextmanager
def disk_for(condition: Condition, workdir: Path) -> Iterator[Disk]:
    """Make the condition's filesystem with sibling etcd/ and probe/ directories; undo it.

    The throttled case sets no limit yet: `measure` applies it once etcd answers.
    """
    loop_size = LOOP_SIZE_BYTES if condition.write_iops is not None else None
    with condition_disk(
        workdir,
        memory=condition.memory,
        fsync_delay_ms=condition.fsync_delay_ms,
        loop_size_bytes=loop_size,
    ) as made:
        disk = Disk(made.root / "etcd", made.root / "probe", made.prefix, made.throttled)
        disk.etcd_dir.mkdir(mode=0o700)
        disk.probe_dir.mkdir()
        yield disk


@dataclass
class Measurement:
    """Everything measured for one condition; `Measurement.row` renders it."""

    condition: str
    description: str
    window_seconds: float
    etcd_fsyncs: float
    etcd_p99: float | None
    probe_runs: int
    probe_failures: int
    probe_fsyncs: float
    probe_p99: float | None
    probe_p99_after: list[float | None]
    etcd_solo_p99: float | None
    etcd_share_over_8ms: float | None
    etcd_share_over_16ms: float | None
    probe_share_over_10ms: float | None
    puts: int
    put_errors: int
    put_p99: float | None
    loadavg_before: float
    loadavg_after: float

    @property
    def etcd_above(self) -> bool | None:
        """etcd's verdict: p99 above 10 ms (None without data)."""
        return None if self.etcd_p99 is None else self.etcd_p99 > ETCD_FSYNC_P99_SECONDS

    @property
    def probe_above(self) -> bool | None:
        """The probe's verdict over the whole window."""
        return None if self.probe_p99 is None else self.probe_p99 > ETCD_FSYNC_P99_SECONDS

    @property
    def clear(self) -> bool:
        """etcd's p99 is outside the 8-12 ms band, so the acceptance rule applies."""
        low, high = AMBIGUOUS_BAND
        return self.etcd_p99 is not None and not low <= self.etcd_p99 <= high

    @property
    def agree(self) -> bool:
        """Both verdicts exist and are equal."""
        return self.etcd_above is not None and self.etcd_above == self.probe_above

    @property
    def ratio(self) -> float | None:
        """probe p99 / etcd p99."""
        if not self.etcd_p99 or self.probe_p99 is None:
            return None
        return self.probe_p99 / self.etcd_p99

    @property
    def runs_to_agree(self) -> int | None:
        """Fewest runs k after which the probe's verdict matches etcd's and stays matching."""
        if self.etcd_above is None:
            return None
        needed = None
        for k, p99 in enumerate(self.probe_p99_after, start=1):
            ok = p99 is not None and (p99 > ETCD_FSYNC_P99_SECONDS) == self.etcd_above
            if ok and needed is None:
                needed = k
            elif not ok:
                needed = None
        return needed


# --- PromQL over the cumulative histograms -----------------------------------------------


def bucket_increase(metric: str, selector: str, start: float, end: float) -> str:
    """PromQL: per-`le` increase of a cumulative histogram between two instants, exactly.

    The difference of the values at both ends; when the series did not exist yet at
    `start` (a Pushgateway group is created by the first push) the value at `end` is the
    increase, like a counter that started at zero.
    """
    at_end = f"sum by (le) ({metric}_bucket{{{selector}}} @ {end:.3f})"
    at_start = f"sum by (le) ({metric}_bucket{{{selector}}} @ {start:.3f})"
    return f"(({at_end} - {at_start}) or {at_end})"


def p99_between(
    prom_url: str, metric: str, selector: str, start: float, end: float
) -> float | None:
    """histogram_quantile(0.99, bucket increase over (start, end]); None without samples."""
    promql = f"histogram_quantile({QUANTILE}, {bucket_increase(metric, selector, start, end)})"
    result = services.query(prom_url, promql, at=end)
    if not result:
        return None
    value = float(result[0]["value"][1])  # type: ignore[index]
    return None if math.isnan(value) else value


def buckets_between(
    prom_url: str, metric: str, selector: str, start: float, end: float
) -> dict[float, float]:
    """{le: count increase} over (start, end]; le=+Inf included as math.inf."""
    result = services.query(prom_url, bucket_increase(metric, selector, start, end), at=end)
    return {float(s["metric"]["le"]): float(s["value"][1]) for s in result}  # type: ignore[index]


def share_above(buckets: dict[float, float], le: float) -> float | None:
    """Fraction of samples above bucket boundary `le` (exact: `le` is a boundary)."""
    total = buckets.get(math.inf, 0.0)
    if total <= 0 or le not in buckets:
        return None
    return 1.0 - buckets[le] / total


# --- running things ----------------------------------------------------------------------


def run_bounded(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run `cmd` in its own session; on timeout SIGTERM it (the CLI then stops fio), then
    SIGKILL the group. Never leaves the process behind."""
    proc = subprocess.Popen(
        list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def probe_command(
    disk: Disk, gateway_url: str, storageclass: str, state: Path, jobs_dir: Path | None = None
) -> list[str]:
    """`fioprobe probe` as a CronJob would run it, inside the disk's cgroup if it has one."""
    return [
        *disk.prefix,
        sys.executable,
        "-m",
        "fioprobe",
        "probe",
        f"--storageclass={storageclass}",
        f"--profile={PROFILE}",
        f"--dir={disk.probe_dir}",
        f"--state={state}",
        f"--gateway={gateway_url}",
        "--quiet",
        *([f"--jobs-dir={jobs_dir}"] if jobs_dir else []),
    ]


def variant_jobs_dir(workdir: Path, overrides: dict[str, str]) -> Path | None:
    """A jobs/ directory whose etcd-fsync profile has `overrides` set (None: the real one).

    Why a copy: proposing a profile change needs evidence, and jobs/ belongs to others;
    the CLI's --jobs-dir runs the variant through the same safety and budget checks.
    """
    if not overrides:
        return None
    lines = (REPO / "jobs" / f"{PROFILE}.fio").read_text().splitlines()
    kept = [line for line in lines if line.split("=", 1)[0].strip() not in overrides]
    kept += [f"{key}={value}" for key, value in overrides.items()]
    jobs = workdir / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / f"{PROFILE}.fio").write_text("\n".join(kept) + "\n")
    return jobs


def scalar(prom_url: str, promql: str) -> float | None:
    """First value of an instant query now, or None."""
    result = services.query(prom_url, promql)
    return float(result[0]["value"][1]) if result else None  # type: ignore[index]


def measure(
    condition: Condition,
    workdir: Path,
    *,
    runs: int,
    solo_seconds: float = 10.0,
    max_seconds: float = 300.0,
    min_window_seconds: float = MIN_WINDOW_SECONDS,
    overrides: dict[str, str] | None = None,
    log: object = print,
) -> Measurement:
    """Run etcd + load + probes on one condition and measure both p99s from Prometheus.

    Bounded: at most `runs` probe runs and `max_seconds` for the probe phase (fewer runs are
    reported if time runs out; at least one is always attempted). The window lasts at least
    `min_window_seconds` (etcd's load goes on after a quick last run) so that etcd's side
    has enough fsyncs for a p99 on a disk where the probe is done in a second.
    """
    say = log if callable(log) else print
    loadavg_before = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(disk_for(condition, workdir))
        gateway = services.pushgateway(workdir / "pushgateway").start()
        stack.callback(gateway.stop)
        etcd = services.etcd(workdir / "etcd-run", disk.etcd_dir)
        etcd.command = [*disk.prefix, *etcd.command]  # blkio: etcd runs inside the cgroup
        stack.callback(etcd.stop)
        etcd.start(timeout=60)
        prometheus = services.prometheus(
            workdir / "prometheus",
            {"pushgateway": f"127.0.0.1:{gateway.port}", "etcd": f"127.0.0.1:{etcd.port}"},
            scrape_interval="1s",
        ).start(timeout=60)
        stack.callback(prometheus.stop)
        if disk.throttled is not None:
            assert etcd.process is not None
            assert etcd.process.pid in disk.throttled.cgroup.pids(), "etcd is not in the cgroup"
            disk.throttled.set_limits(write_iops=condition.write_iops)
        load = services.EtcdWriteLoad(
            etcd.url, rate=PUT_RATE, max_seconds=solo_seconds + max_seconds + 120,
            value_bytes=PUT_VALUE_BYTES, key_prefix="fidelity/", keys=100,
        ).start()  # fmt: skip
        stack.callback(load.stop)
        try:
            jobs_dir = variant_jobs_dir(workdir, overrides or {})
            result = _measure_window(
                condition,
                prometheus,
                gateway,
                disk,
                load,
                runs,
                solo_seconds,
                max_seconds,
                min_window_seconds,
                say,
                jobs_dir,
            )
            result.loadavg_before = loadavg_before
            return result
        except (OSError, services.ServiceError, TimeoutError) as exc:
            # Say which component went away (another test's broad pkill, a crash), with
            # the end of its log: the work directory is removed on the way out.
            states = ", ".join(
                f"{s.name} {'running' if s.process and s.process.poll() is None else 'EXITED'}"
                f" (log: {s.tail(3)})"
                for s in (prometheus, gateway, etcd)
            )
            raise MeasureError(f"{condition.name}: {exc}; {states}") from exc
    raise AssertionError("unreachable")  # pragma: no cover  (the with body returns)


class MeasureError(RuntimeError):
    """A condition could not be measured; the message names the component and its log."""


def _measure_window(
    condition: Condition,
    prometheus: services.Service,
    gateway: services.Service,
    disk: Disk,
    load: services.EtcdWriteLoad,
    runs: int,
    solo_seconds: float,
    max_seconds: float,
    min_window_seconds: float,
    say: Callable[[str], object],
    jobs_dir: Path | None,
) -> Measurement:
    """The measuring part of `measure`: solo window, probe runs, queries."""
    storageclass = f"fidelity-{condition.name}"
    selector = f'storageclass="{storageclass}",profile="{PROFILE}"'
    services.wait_for(
        lambda: (scalar(prometheus.url, f"{ETCD_METRIC}_count") or 0) > 0,
        60,
        "etcd's WAL fsync histogram in Prometheus",
    )
    t_solo = time.time()
    time.sleep(solo_seconds)
    t0 = time.time()
    say(f"[{condition.name}] etcd {load.url}, load {len(load.latencies)} puts so far")
    ends: list[float] = []
    failures = 0
    state = gateway.workdir / "probe-state.json"
    deadline = time.monotonic() + max_seconds
    for k in range(1, runs + 1):
        if k > 1 and time.monotonic() > deadline:
            say(f"[{condition.name}] time budget spent after {k - 1} runs")
            break
        started = time.monotonic()
        done = run_bounded(
            probe_command(disk, gateway.url, storageclass, state, jobs_dir),
            PROBE_TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            failures += 1
            say(f"[{condition.name}] probe run {k} exited {done.returncode}: {done.stderr!r}")
        services.wait_for(
            lambda k=k: (scalar(prometheus.url, f"fioprobe_runs_total{{{selector}}}") or 0) >= k,
            30,
            f"probe run {k} in Prometheus",
        )
        ends.append(time.time())
        say(f"[{condition.name}] probe run {k} took {time.monotonic() - started:.1f}s")
    if (short_by := t0 + min_window_seconds - time.time()) > 0:
        time.sleep(short_by)
    load.stop()
    t_end = max(ends[-1], t0 + min_window_seconds)
    url = prometheus.url
    etcd_buckets = buckets_between(url, ETCD_METRIC, "", t0, t_end)
    probe_buckets = buckets_between(url, PROBE_METRIC, selector, t0, t_end)
    puts = sorted(load.latencies)
    return Measurement(
        condition=condition.name,
        description=condition.describe(),
        window_seconds=t_end - t0,
        etcd_fsyncs=etcd_buckets.get(math.inf, 0.0),
        etcd_p99=p99_between(url, ETCD_METRIC, "", t0, t_end),
        probe_runs=len(ends),
        probe_failures=failures,
        probe_fsyncs=probe_buckets.get(math.inf, 0.0),
        probe_p99=p99_between(url, PROBE_METRIC, selector, t0, t_end),
        probe_p99_after=[p99_between(url, PROBE_METRIC, selector, t0, t) for t in ends],
        etcd_solo_p99=(p99_between(url, ETCD_METRIC, "", t_solo, t0) if solo_seconds > 0 else None),
        etcd_share_over_8ms=share_above(etcd_buckets, 0.008),
        etcd_share_over_16ms=share_above(etcd_buckets, 0.016),
        probe_share_over_10ms=share_above(probe_buckets, ETCD_FSYNC_P99_SECONDS),
        puts=len(puts),
        put_errors=len(load.errors),
        put_p99=puts[min(len(puts) - 1, int(QUANTILE * len(puts)))] if puts else None,
        loadavg_before=0.0,  # set by `measure`
        loadavg_after=os.getloadavg()[0],
    )


# --- report ------------------------------------------------------------------------------


def ms(value: float | None) -> str:
    """Seconds as milliseconds for the table."""
    return "n/a" if value is None else f"{value * 1000:.2f}"


def yes_no(value: bool | None) -> str:
    """A verdict cell."""
    return "n/a" if value is None else ("**above**" if value else "below")


def pct(value: float | None) -> str:
    """A share as a percentage."""
    return "n/a" if value is None else f"{value * 100:.1f}%"


def render_table(results: Sequence[Measurement], header: str) -> str:
    """The markdown that goes between the table markers of docs/FIDELITY.md."""
    lines = [
        header,
        "",
        "| condition | etcd p99 ms | probe p99 ms | ratio probe/etcd | etcd > 10 ms | "
        "probe > 10 ms | agree | clear (outside 8-12 ms) | runs to agree |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in results:
        ratio = "n/a" if m.ratio is None else f"{m.ratio:.2f}"
        rta = "never" if m.runs_to_agree is None else str(m.runs_to_agree)
        lines.append(
            f"| {m.condition} | {ms(m.etcd_p99)} | {ms(m.probe_p99)} | {ratio} | "
            f"{yes_no(m.etcd_above)} | {yes_no(m.probe_above)} | {'yes' if m.agree else 'NO'} | "
            f"{'yes' if m.clear else 'no'} | {rta} of {m.probe_runs} |"
        )
    lines += [
        "",
        "| condition | disk | window s | etcd fsyncs | etcd > 8 ms / > 16 ms | "
        "etcd p99 ms, probe idle | probe fsyncs (runs, failed) | probe > 10 ms | "
        "probe p99 ms after 1, 2, ... runs | puts (errors), client put p99 ms | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in results:
        after = ", ".join(ms(v) for v in m.probe_p99_after)
        lines.append(
            f"| {m.condition} | {m.description} | {m.window_seconds:.0f} | {m.etcd_fsyncs:.0f} | "
            f"{pct(m.etcd_share_over_8ms)} / {pct(m.etcd_share_over_16ms)} | "
            f"{ms(m.etcd_solo_p99)} | {m.probe_fsyncs:.0f} ({m.probe_runs}, "
            f"{m.probe_failures}) | {pct(m.probe_share_over_10ms)} | {after} | "
            f"{m.puts} ({m.put_errors}), {ms(m.put_p99)} | "
            f"{m.loadavg_before:.1f} -> {m.loadavg_after:.1f} |"
        )
    return "\n".join(lines)


def write_table(doc: Path, table: str, variant: str = "") -> None:
    """Replace the text between the table markers of `doc`, keeping the prose around it.

    A profile variant (--set) has its own markers, so it never overwrites the main table.
    """
    name = f"fidelity-table{' ' + variant if variant else ''}"
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = doc.read_text() if doc.exists() else "# Fidelity\n"
    if begin not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{table}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    """Measure the chosen conditions one after the other and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated")
    parser.add_argument("--runs", type=int, default=5, help="probe runs per condition")
    parser.add_argument(
        "--solo-seconds", type=float, default=10.0, help="etcd alone before the probe starts"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=1500.0, help="budget for all conditions"
    )
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "FIDELITY.md")
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="run a variant of jobs/etcd-fsync.fio with this option changed (repeatable)",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.conditions.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        parser.error(f"unknown conditions {unknown}; known: {', '.join(CONDITIONS)}")
    if os.geteuid() != 0:
        parser.error("needs root (FUSE mounts, loop devices, cgroups)")
    if any("=" not in item for item in args.set):
        parser.error("--set wants KEY=VALUE")
    overrides = dict(item.split("=", 1) for item in args.set)
    started = time.monotonic()
    results: list[Measurement] = []
    failed: list[str] = []
    for i, name in enumerate(names):
        left = args.max_seconds - (time.monotonic() - started)
        per_condition = left / (len(names) - i) - 40  # start-up and shutdown margin
        if per_condition < 20:
            print(f"fidelity: no time left for {name}; stopping", file=sys.stderr)
            break
        with tempfile.TemporaryDirectory(prefix=f"fidelity-{name}-") as tmp:
            try:
                results.append(
                    measure(
                        CONDITIONS[name],
                        Path(tmp),
                        runs=args.runs,
                        solo_seconds=args.solo_seconds,
                        max_seconds=per_condition - args.solo_seconds,
                        overrides=overrides,
                        log=lambda line: print(line, file=sys.stderr),
                    )
                )
            except MeasureError as exc:  # the other conditions still count
                print(f"fidelity: {exc}", file=sys.stderr)
                failed.append(f"{name} ({str(exc)[:300]})")
    elapsed = time.monotonic() - started
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`bench/fidelity.py --runs {args.runs} --solo-seconds {args.solo_seconds:g}"
        f"{''.join(f' --set {k}={v}' for k, v in overrides.items())}` in "
        f"{elapsed:.0f} s on {platform.node() or 'this machine'} ({os.cpu_count()} CPUs, "
        f"kernel {platform.release()}), shared with other engineers' test runs (load below)."
    )
    if failed:
        header += "\n\nNot measured (a component failed): " + "; ".join(failed)
    table = render_table(results, header)
    print(table)
    write_table(args.output, table, " ".join(f"{k}={v}" for k, v in overrides.items()))
    if args.json:
        args.json.write_text(json.dumps([asdict(m) for m in results], indent=2))
    clear_disagreements = [m.condition for m in results if m.clear and not m.agree]
    if clear_disagreements:
        print(f"fidelity: verdicts disagree on {clear_disagreements}", file=sys.stderr)
        return 1
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
