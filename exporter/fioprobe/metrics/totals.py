"""Cumulative totals of one probe group, as plain data, and how a run adds to them.

A Pushgateway keeps only the last push, so every push carries totals over all runs of its
group (docs/DESIGN.md, "Why cumulative"). This module is what those totals are and how they grow:
`merge_run` adds one run, `combine` adds runs to totals read back from the Pushgateway, and a
`GroupSchema` says under which names a kind of group pushes them (the fio probes' groups,
`PROBE_SCHEMA`; the provisioning probe's, `fioprobe.metrics.provision`), so that one state
file, one read-back and one push path serve every kind. It knows no file and no gateway:
`fioprobe.publish.state` saves the totals between runs, the gateway reads and pushes them,
and the offline commands (`convert`, `backfill`) merge runs the very same way without either.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from fioprobe.fio.model import Run
from fioprobe.grouping import JOB
from fioprobe.metrics.histogram import BUCKET_BOUNDS_SECONDS, BUCKET_COUNT, op_histogram
from fioprobe.metrics.table import EXPORTED_OPS

#: Every count fioprobe keeps (runs, bytes, histogram buckets) stays below this. Counts are
#: floats on the wire, and from 2**53 on consecutive integers are no longer distinct: an
#: increment could be lost, and the read-back could not tell the count from garbage. The
#: state file, the push, the read-back and the offline exports all use this one limit.
COUNT_LIMIT = 2**53
#: The limit as a message shows it.
COUNT_LIMIT_SHOWN = f"2**{COUNT_LIMIT.bit_length() - 1}"


@dataclass(frozen=True, slots=True)
class HistogramRow:
    """One cumulative histogram of a kind of group: its key in `GroupTotals.histograms`, the
    family it is pushed as, and the labels of its series in that family beyond the grouping
    key (none when the family holds one histogram)."""

    key: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSchema:
    """What one kind of Pushgateway group keeps cumulatively, and under which names: the
    read-back takes exactly these families from the gateway, and a state file's totals are
    valid only with these keys and this bucket layout."""

    #: The group's `job` label.
    job: str
    #: (key in `GroupTotals`, counter name) of every cumulative counter.
    counters: tuple[tuple[str, str], ...]
    #: The gauge that carries the last successful run's time forward.
    last_success: str
    histograms: tuple[HistogramRow, ...]
    #: The bucket bounds of every histogram of the kind, +Inf included.
    bounds: tuple[float, ...]

    @property
    def bucket_count(self) -> int:
        return len(self.bounds)


#: The fio probes' groups: a latency histogram per operation, runs, failures and IO bytes.
PROBE_SCHEMA = GroupSchema(
    job=JOB,
    counters=(
        ("runs_total", "fioprobe_runs_total"),
        ("failures_total", "fioprobe_failures_total"),
        ("read_bytes_total", "fioprobe_read_bytes_total"),
        ("written_bytes_total", "fioprobe_written_bytes_total"),
    ),
    last_success="fioprobe_last_success_timestamp_seconds",
    histograms=tuple(HistogramRow(op, f"fioprobe_{op}_latency_seconds") for op in EXPORTED_OPS),
    bounds=BUCKET_BOUNDS_SECONDS,
)


@dataclass(slots=True)
class HistogramTotals:
    """Per-bucket counts (not cumulative; last is +Inf) and the sum of observations."""

    counts: list[int] = field(default_factory=lambda: [0] * BUCKET_COUNT)
    sum_seconds: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add(self, counts: list[int], sum_seconds: float) -> None:
        if len(counts) != len(self.counts):
            raise ValueError(f"{len(counts)} bucket counts, expected {len(self.counts)}")
        self.counts = list(map(operator.add, self.counts, counts))
        self.sum_seconds += sum_seconds


@dataclass(slots=True)
class GroupTotals:
    """Everything cumulative about one Pushgateway group."""

    histograms: dict[str, HistogramTotals] = field(default_factory=dict)
    runs_total: int = 0
    failures_total: int = 0
    read_bytes_total: int = 0
    written_bytes_total: int = 0
    last_success_timestamp: float | None = None
    #: Counters of a kind of group beyond the fields above, by their key in its schema (the
    #: provisioning probe's objects removed).
    other: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.runs_total == 0 and not self.histograms

    def count(self, key: str) -> int:
        """The counter `key` of a schema: a field above, or one of `other`."""
        if key in _COUNTER_FIELDS:
            value: int = getattr(self, key)
            return value
        return self.other.get(key, 0)

    def set_count(self, key: str, value: int) -> None:
        if key in _COUNTER_FIELDS:
            setattr(self, key, value)
        else:
            self.other[key] = value

    def to_json(self) -> dict[str, object]:
        return {
            "histograms": {
                op: {"counts": h.counts, "sum_seconds": h.sum_seconds}
                for op, h in sorted(self.histograms.items())
            },
            "runs_total": self.runs_total,
            "failures_total": self.failures_total,
            "read_bytes_total": self.read_bytes_total,
            "written_bytes_total": self.written_bytes_total,
            "last_success_timestamp": self.last_success_timestamp,
            # Only when there are any: a fio probe's file stays as older fioprobes wrote it.
            **({"other": dict(sorted(self.other.items()))} if self.other else {}),
        }

    @classmethod
    def from_json(cls, data: object, schema: GroupSchema = PROBE_SCHEMA) -> GroupTotals:
        """Totals of a group of `schema` from their `to_json` form, every number checked; a
        bad one is a ValueError naming it. Whether the counts are still below COUNT_LIMIT is
        `beyond_limit`'s part."""
        if not isinstance(data, dict):
            raise ValueError("totals are not an object")
        keys = {row.key for row in schema.histograms}
        others = {key for key, _ in schema.counters} - set(_COUNTER_FIELDS)
        try:
            totals = cls(
                runs_total=_count(data, "runs_total"),
                failures_total=_count(data, "failures_total"),
                read_bytes_total=_count(data, "read_bytes_total"),
                written_bytes_total=_count(data, "written_bytes_total"),
                last_success_timestamp=optional_float(data, "last_success_timestamp"),
            )
            other = data.get("other", {})
            for key in other:
                if key not in others:
                    raise ValueError(f"counter {key!r} is not one of this group's")
                totals.other[key] = _count(other, key)
            for op, hist in data.get("histograms", {}).items():
                counts, seconds = hist["counts"], hist["sum_seconds"]
                if (
                    op not in keys
                    or len(counts) != schema.bucket_count
                    or any(type(c) is not int or c < 0 for c in counts)
                    or isinstance(seconds, bool)
                    or not isinstance(seconds, int | float)
                    or not (math.isfinite(seconds) and seconds >= 0)
                ):
                    raise ValueError(f"histogram {op!r} is malformed")
                totals.histograms[op] = HistogramTotals(list(counts), float(seconds))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(str(exc)) from None
        return totals

    def beyond_limit(self) -> str | None:
        """The first count at or above COUNT_LIMIT, as words, or None when all are below.

        A histogram is pushed cumulatively, so its total count is what must stay below.
        """
        for name in (*_COUNTER_FIELDS, *sorted(self.other)):
            value = self.count(name)
            if value >= COUNT_LIMIT:
                return f"{name} is {value}"
        for op, histogram in sorted(self.histograms.items()):
            if histogram.count >= COUNT_LIMIT:
                return f"the {op} histogram counts {histogram.count} samples"
        return None


#: The counters of GroupTotals, by their attribute names.
_COUNTER_FIELDS = ("runs_total", "failures_total", "read_bytes_total", "written_bytes_total")


def _count(data: dict[str, object], key: str) -> int:
    value = data.get(key, 0)
    if type(value) is not int or value < 0:
        raise ValueError(f"{key} is not a non-negative integer")
    return value


def optional_float(data: dict[str, object], key: str) -> float | None:
    """`data[key]` as a finite float, None when absent; anything else is a ValueError."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{key} is not a number")
    return float(value)


def combine(base: GroupTotals, delta: GroupTotals) -> GroupTotals:
    """`base` (read back from the Pushgateway) plus runs counted in no pushed totals yet."""
    result = GroupTotals(
        runs_total=base.runs_total + delta.runs_total,
        failures_total=base.failures_total + delta.failures_total,
        read_bytes_total=base.read_bytes_total + delta.read_bytes_total,
        written_bytes_total=base.written_bytes_total + delta.written_bytes_total,
        last_success_timestamp=_latest(base.last_success_timestamp, delta.last_success_timestamp),
    )
    for source in (base, delta):
        for key, value in source.other.items():
            result.other[key] = result.other.get(key, 0) + value
        for op, hist in source.histograms.items():
            empty = HistogramTotals([0] * len(hist.counts))
            result.histograms.setdefault(op, empty).add(hist.counts, hist.sum_seconds)
    return result


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def merge_run(totals: GroupTotals, run: Run | None, *, success: bool, finished_at: float) -> None:
    """Add one run's samples and cost to `totals` (in place)."""
    totals.runs_total += 1
    if not success:
        totals.failures_total += 1
    else:
        totals.last_success_timestamp = finished_at
    if run is None:
        return
    for job in run.jobs:
        for op, stats in job.ops.items():
            if op == "read":
                totals.read_bytes_total += stats.io_bytes
            elif op in ("write", "trim"):
                totals.written_bytes_total += stats.io_bytes
            if op not in EXPORTED_OPS:
                continue
            counts, total_seconds, source = op_histogram(stats)
            if source == "none":
                continue
            histogram = totals.histograms.get(op)
            if histogram is None:
                histogram = totals.histograms[op] = HistogramTotals()
            histogram.add(counts, total_seconds)
