"""Cumulative totals of one probe group, as plain data, and how a run adds to them.

A Pushgateway keeps only the last push, so every push carries totals over all runs of its
group (docs/DESIGN.md, "Why cumulative"). This module is what those totals are and how they grow:
`merge_run` adds one run, `combine` adds runs to totals read back from the Pushgateway. It
knows no file and no gateway: `fioprobe.publish.state` saves the totals between runs, the
gateway reads and pushes them, and the offline commands (`convert`, `backfill`) merge runs
the very same way without either.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from fioprobe.fio.model import Run
from fioprobe.metrics.histogram import BUCKET_COUNT, op_histogram
from fioprobe.metrics.table import EXPORTED_OPS

#: Every count fioprobe keeps (runs, bytes, histogram buckets) stays below this. Counts are
#: floats on the wire, and from 2**53 on consecutive integers are no longer distinct: an
#: increment could be lost, and the read-back could not tell the count from garbage. The
#: state file, the push, the read-back and the offline exports all use this one limit.
COUNT_LIMIT = 2**53
#: The limit as a message shows it.
COUNT_LIMIT_SHOWN = f"2**{COUNT_LIMIT.bit_length() - 1}"


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

    @property
    def empty(self) -> bool:
        return self.runs_total == 0 and not self.histograms

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
        }

    @classmethod
    def from_json(cls, data: object) -> GroupTotals:
        """Totals from their `to_json` form, every number checked; a bad one is a ValueError
        naming it. Whether the counts are still below COUNT_LIMIT is `beyond_limit`'s part."""
        if not isinstance(data, dict):
            raise ValueError("totals are not an object")
        try:
            totals = cls(
                runs_total=_count(data, "runs_total"),
                failures_total=_count(data, "failures_total"),
                read_bytes_total=_count(data, "read_bytes_total"),
                written_bytes_total=_count(data, "written_bytes_total"),
                last_success_timestamp=optional_float(data, "last_success_timestamp"),
            )
            for op, hist in data.get("histograms", {}).items():
                counts, seconds = hist["counts"], hist["sum_seconds"]
                if (
                    op not in EXPORTED_OPS
                    or len(counts) != BUCKET_COUNT
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
        for name in _COUNTER_FIELDS:
            value = getattr(self, name)
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
        for op, hist in source.histograms.items():
            result.histograms.setdefault(op, HistogramTotals()).add(hist.counts, hist.sum_seconds)
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
