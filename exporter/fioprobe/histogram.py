"""Turn one fio latency block into counts per contract bucket.

Two sources, in order of trust:
- json+ `bins`: fio's own log-linear histogram (at most 1/128 relative error per bin). Each
  bin's representative latency goes to the first bucket whose `le` is at or above it, so the
  `le="0.01"` bucket counts exactly the samples fio binned at or below 10 ms.
- percentiles: plain json and old fio have only percentile points. The cumulative fraction
  at each bucket bound is the highest percentile whose latency is at or below it. This is a
  step approximation, marked as such in fioprobe_info{histogram_source="percentiles"}.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from .metrics import LATENCY_BUCKETS_SECONDS
from .model import Bins, LatencyStats

#: Bucket bounds in integer nanoseconds: bin keys are integers, so the comparison is exact.
_BOUNDS_NS: tuple[int, ...] = tuple(round(le * 1e9) for le in LATENCY_BUCKETS_SECONDS)
#: Number of buckets including +Inf.
BUCKET_COUNT = len(_BOUNDS_NS) + 1


def counts_from_bins(bins: Bins) -> list[int]:
    """Per-bucket (not cumulative) counts; the last entry is the +Inf bucket.

    The bins are ascending, so the bucket bounds split them into runs found by bisection,
    and each bucket is a C-level sum of one slice (no per-bin Python loop). Buckets below
    the fastest bin and above the slowest one are empty and are not searched at all.
    """
    latencies, values = bins.latencies_ns, bins.counts
    counts = [0] * BUCKET_COUNT
    if not latencies:
        return counts
    first = bisect_left(_BOUNDS_NS, latencies[0])  # the bucket of the fastest bin
    last = bisect_left(_BOUNDS_NS, latencies[-1])  # the bucket of the slowest one
    start = 0
    for index in range(first, last):
        end = bisect_right(latencies, _BOUNDS_NS[index], start)  # bins at or below the bound
        counts[index] = sum(values[start:end])
        start = end
    counts[last] = sum(values[start:])
    return counts


def counts_from_percentiles(latency: LatencyStats, samples: int) -> list[int]:
    """Per-bucket counts estimated from fio's percentile points, `samples` in total."""
    points = sorted(latency.percentiles.items(), key=lambda item: item[1])
    counts = [0] * BUCKET_COUNT
    if samples <= 0:
        return counts
    previous = 0
    for index, le in enumerate(LATENCY_BUCKETS_SECONDS):
        if latency.max_s and latency.max_s <= le:
            fraction = 1.0
        elif latency.min_s > le:
            fraction = 0.0
        else:
            fraction = max((pct / 100 for pct, value in points if value <= le), default=0.0)
        cumulative = round(samples * fraction)
        counts[index] = cumulative - previous
        previous = cumulative
    counts[-1] = samples - previous
    return counts


def cumulative(counts: list[int]) -> list[int]:
    """Running totals, as Prometheus buckets are."""
    total = 0
    result = []
    for count in counts:
        total += count
        result.append(total)
    return result
