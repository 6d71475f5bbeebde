"""Numbers of the report: per-job values, tables, baseline ratios, sweeps and steps.

Every latency value is fio's own: its percentile points, mean, max and stddev as the exporter's
model holds them (seconds). Only where fio printed no such percentile (custom
`percentile_list`) is it estimated from the metric contract's buckets, with the same
interpolation Prometheus's `histogram_quantile` uses, and marked approximate.

A table cell that holds several runs shows the *lower median* of their values, so a cell is
always one real run's number (and one run's cell is exactly fio's number).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from fioprobe.fio.model import OPERATIONS, OpStats

# The exporter's own IOPS rule (fsyncs per second of writing for sync), so that the report
# and fioprobe_<op>_iops agree.
from fioprobe.metrics.collector import operation_iops as exporter_iops
from fioprobe.metrics.histogram import BUCKET_BOUNDS_SECONDS, cumulative, op_histogram
from fioprobe.results.load import SWEEP_OPTIONS, Entry

#: Latency metrics per operation, in table order, with fio's percentile key.
LATENCY_METRICS: tuple[str, ...] = ("p99", "p99.9", "mean", "max", "stddev")
_PERCENTILE_OF = {"p99": 99.0, "p99.9": 99.9}
#: Operations in table order (sync first: it is what etcd cares about).
REPORT_OPS: tuple[str, ...] = ("sync", "write", "read", "mixed", "trim")
assert set(REPORT_OPS) == set(OPERATIONS)


@dataclass(frozen=True, slots=True)
class Value:
    """One number of one job: seconds for latency, operations per second for iops."""

    value: float
    #: True when estimated from the contract buckets (fio printed no such percentile).
    approx: bool = False


def has_latency(stats: OpStats | None) -> bool:
    return stats is not None and stats.latency is not None and stats.latency.has_data


def active(stats: OpStats | None) -> bool:
    """Whether this direction exists and did any IO (`OpStats.did_io`)."""
    return stats is not None and stats.did_io


def latency_value(stats: OpStats | None, metric: str) -> Value | None:
    """fio's number for `metric` of this operation, in seconds; None without data."""
    if not has_latency(stats):
        return None
    assert stats is not None and stats.latency is not None
    latency = stats.latency
    if metric in _PERCENTILE_OF:
        exact = latency.percentiles.get(_PERCENTILE_OF[metric])
        if exact is not None:
            return Value(exact)
        counts, _, source = op_histogram(stats)
        estimate = bucket_quantile(_PERCENTILE_OF[metric] / 100, cumulative(counts))
        if source == "none" or math.isnan(estimate):
            return None
        return Value(estimate, approx=True)
    return Value({"mean": latency.mean_s, "max": latency.max_s, "stddev": latency.stddev_s}[metric])


def iops_value(entry: Entry, op: str) -> Value | None:
    """Operations per second as the exporter exports them (`fioprobe_<op>_iops`)."""
    stats = entry.job.ops.get(op)
    if not active(stats):
        return None
    assert stats is not None
    return Value(exporter_iops(entry.job, stats))


def primary_op(entry: Entry) -> str | None:
    """The operation that characterises a job: sync when it fsyncs, else the busiest one."""
    if has_latency(entry.job.ops.get("sync")):
        return "sync"
    busiest = [
        (stats.sample_count, op)
        for op, stats in entry.job.ops.items()
        if op != "sync" and active(stats) and has_latency(stats)
    ]
    return max(busiest)[1] if busiest else None


def total_iops(entry: Entry) -> float:
    """Read + write (+ trim) IOPS of a job: the x axis of a response curve."""
    return sum(
        stats.iops
        for op, stats in entry.job.ops.items()
        if op in ("read", "write", "trim", "mixed") and active(stats)
    )


# --- Prometheus's histogram_quantile, for the contract buckets ----------------------------


def bucket_quantile(q: float, cumulative_counts: Sequence[float]) -> float:
    """Prometheus's `histogram_quantile` over the contract buckets (promql bucketQuantile).

    `cumulative_counts` has one entry per bucket of BUCKET_BOUNDS_SECONDS (+Inf last), as
    exported. Same steps and float operations as Prometheus 2.x, so a backfilled series
    queried with histogram_quantile gives exactly this number.
    """
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    bounds = BUCKET_BOUNDS_SECONDS
    counts = [float(c) for c in cumulative_counts]
    # ensureMonotonic: Prometheus repairs non-monotonic buckets the same way.
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    # sort.Search over all but the +Inf bucket: the first bucket holding the rank.
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    bucket_start, bucket_end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        bucket_start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


# --- tables -------------------------------------------------------------------------------


@dataclass(slots=True)
class CellData:
    values: list[Value]
    sources: list[str]

    @property
    def value(self) -> Value:
        """The lower median: always one real run's number."""
        ordered = sorted(self.values, key=lambda v: v.value)
        return ordered[(len(ordered) - 1) // 2]


@dataclass(slots=True)
class Grid:
    """A row x column table of values, in display order."""

    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], CellData] = field(default_factory=dict)

    def get(self, row: str, column: str) -> CellData | None:
        return self.cells.get((row, column))


def ordered_groups(entries: Iterable[Entry], baseline: str | None) -> list[str]:
    groups = sorted({e.group for e in entries})
    if baseline in groups:
        groups.remove(baseline)
        groups.insert(0, baseline)
    return groups


def grid(
    entries: Sequence[Entry],
    value_of: Callable[[Entry], Value | None],
    column_of: Callable[[Entry], str] = lambda e: e.group,
    columns: list[str] | None = None,
) -> Grid:
    """Rows (sorted) x columns of `value_of(entry)`; rows without any value are left out."""
    cells: dict[tuple[str, str], CellData] = {}
    for entry in entries:
        value = value_of(entry)
        if value is None:
            continue
        cell = cells.setdefault((entry.row, column_of(entry)), CellData([], []))
        cell.values.append(value)
        cell.sources.append(entry.source)
    rows = sorted({row for row, _ in cells}, key=_natural_key)
    present = {column for _, column in cells}
    cols = [c for c in (columns or sorted(present, key=_natural_key)) if c in present]
    return Grid(rows, cols, cells)


def _natural_key(text: str) -> list[object]:
    """'qd=2' before 'qd=16': numbers inside names compare as numbers."""
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


natural_key = _natural_key


def ops_present(entries: Sequence[Entry]) -> list[str]:
    found = {op for e in entries for op, s in e.job.ops.items() if has_latency(s) and active(s)}
    found |= {"sync" for e in entries if has_latency(e.job.ops.get("sync"))}
    return [op for op in REPORT_OPS if op in found]


# --- comparisons --------------------------------------------------------------------------


@dataclass(slots=True)
class Comparison:
    baseline: str
    candidate: str
    #: (row, baseline value, candidate value, candidate / baseline)
    rows: list[tuple[str, float, float, float]]

    @property
    def geomean(self) -> float | None:
        ratios = [r for *_, r in self.rows if r > 0 and math.isfinite(r)]
        if not ratios:
            return None
        return math.exp(statistics.fmean(math.log(r) for r in ratios))


def compare(table: Grid, baseline: str) -> list[Comparison]:
    """Every other column against `baseline`, over the rows both have (value > 0)."""
    result = []
    for candidate in table.columns:
        if candidate == baseline:
            continue
        rows = []
        for row in table.rows:
            base, cand = table.get(row, baseline), table.get(row, candidate)
            if base is None or cand is None or base.value.value <= 0:
                continue
            rows.append(
                (row, base.value.value, cand.value.value, cand.value.value / base.value.value)
            )
        if rows:
            result.append(Comparison(baseline, candidate, rows))
    return result


# --- sweeps (response curves) -------------------------------------------------------------


@dataclass(slots=True)
class SweepPoint:
    """One setting of a sweep: the mean over its repeated runs (one run: that run's values),
    with the runs' sample standard deviations for the error bars."""

    setting: int
    iops: float
    mean_s: float
    p99_s: float | None
    #: The last run of the setting (every run's file is in `sources`).
    source: str
    runs: int = 1
    iops_sd: float = 0.0
    mean_sd: float = 0.0
    p99_sd: float | None = None
    sources: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Sweep:
    option: str
    #: The job family without the swept option, e.g. "randread [bs=4k]".
    family: str
    op: str
    #: group -> points ordered by the swept setting
    curves: dict[str, list[SweepPoint]]


def sweeps(entries: Sequence[Entry], minimum_points: int = 3) -> list[Sweep]:
    """Job families run at >= `minimum_points` iodepth (or numjobs) settings in one group."""
    found: list[Sweep] = []
    for option in SWEEP_OPTIONS:
        families: dict[tuple[str, str], dict[str, dict[int, list[Entry]]]] = defaultdict(
            lambda: defaultdict(dict)
        )
        for entry in entries:
            setting = _int(entry.options.get(option))
            op = primary_op(entry)
            if setting is None or op is None:
                continue
            key = (_without_option(entry.family, option), op)
            families[key][entry.group].setdefault(setting, []).append(entry)
        for (family, op), groups in sorted(families.items()):
            curves: dict[str, list[SweepPoint]] = {}
            for group, by_setting in sorted(groups.items()):
                if len(by_setting) < minimum_points:
                    continue
                curves[group] = [
                    _sweep_point(setting, runs, op) for setting, runs in sorted(by_setting.items())
                ]
            if curves:
                found.append(Sweep(option, family, op, curves))
    return found


def _sweep_point(setting: int, runs: list[Entry], op: str) -> SweepPoint:
    """Repeated runs of one setting: their means and sample standard deviations."""
    iops, means, p99s = [], [], []
    for entry in runs:
        stats = entry.job.ops[op]
        mean = latency_value(stats, "mean")
        p99 = latency_value(stats, "p99")
        iops.append(
            total_iops(entry) if op != "sync" else (iops_value(entry, "sync") or Value(0.0)).value
        )
        means.append(mean.value if mean else math.nan)
        p99s.append(p99.value if p99 else None)
    known = [v for v in p99s if v is not None]
    every_p99 = len(known) == len(p99s)
    return SweepPoint(
        setting,
        statistics.fmean(iops),
        statistics.fmean(means),
        statistics.fmean(known) if every_p99 else None,
        runs[-1].source,
        len(runs),
        _sd(iops),
        _sd(means),
        _sd(known) if every_p99 else None,
        [entry.source for entry in runs],
    )


def _sd(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _int(text: str | None) -> int | None:
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return None


def _without_option(family: str, option: str) -> str:
    """'randread [bs=4k, iodepth=8]' -> 'randread [bs=4k]' for option iodepth."""
    if "[" not in family or not family.endswith("]"):
        return family
    name, _, rest = family.partition(" [")
    kept = [p for p in rest[:-1].split(", ") if not p.startswith(f"{option}=")]
    return f"{name} [{', '.join(kept)}]" if kept else name


# --- timelines and steps ------------------------------------------------------------------


@dataclass(slots=True)
class Step:
    #: Index (0-based) of the first point after the step.
    at: int
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.after / self.before if self.before > 0 else math.inf


@dataclass(slots=True)
class Timeline:
    group: str
    node: str | None
    family: str
    op: str
    entries: list[Entry]
    iops: list[float]
    p99_s: list[float | None]
    iops_step: Step | None
    p99_step: Step | None

    @property
    def has_step(self) -> bool:
        return self.iops_step is not None or self.p99_step is not None


def timelines(
    entries: Sequence[Entry], minimum_points: int = 3, step_ratio: float = 2.0
) -> list[Timeline]:
    """Consecutive runs/jobs of one family in one group and node, in the order they ran."""
    series: dict[tuple[str, str, str, str], list[Entry]] = defaultdict(list)
    for entry in entries:
        op = primary_op(entry)
        if op is not None:
            series[(entry.group, entry.node or "", entry.family, op)].append(entry)
    result = []
    for (group, node, family, op), members in sorted(series.items()):
        if len(members) < minimum_points:
            continue
        members.sort(key=lambda e: (e.timestamp, e.source, e.index))
        iops = [
            (iops_value(e, op) or Value(0.0)).value if op == "sync" else _op_iops(e, op)
            for e in members
        ]
        p99s = [_value_or_none(latency_value(e.job.ops.get(op), "p99")) for e in members]
        result.append(
            Timeline(
                group,
                node or None,
                family,
                op,
                members,
                iops,
                p99s,
                find_step(iops, step_ratio),
                find_step([v for v in p99s if v is not None], step_ratio)
                if all(v is not None for v in p99s)
                else None,
            )
        )
    return result


def _op_iops(entry: Entry, op: str) -> float:
    stats = entry.job.ops.get(op)
    return stats.iops if stats is not None else 0.0


def _value_or_none(value: Value | None) -> float | None:
    return None if value is None else value.value


def find_step(values: Sequence[float], ratio: float = 2.0) -> Step | None:
    """The single change point of `values`, if the level changes by at least `ratio`.

    The split is the one that leaves the least squared error around each side's mean in log
    terms (the classic one-change-point fit, on logs because IOPS and latency change by
    factors); the step is then reported by the medians of both sides, and only if they
    differ by `ratio` or more. Needs two points on each side.
    """
    n = len(values)
    if n < 4 or any(v <= 0 or not math.isfinite(v) for v in values):
        return None
    logs = [math.log(v) for v in values]

    def sse(part: Sequence[float]) -> float:
        mean = statistics.fmean(part)
        return sum((x - mean) ** 2 for x in part)

    at = min(range(2, n - 1), key=lambda k: (sse(logs[:k]) + sse(logs[k:]), k))
    before = statistics.median(values[:at])
    after = statistics.median(values[at:])
    if abs(math.log(after / before)) < math.log(ratio):
        return None
    return Step(at, before, after)
