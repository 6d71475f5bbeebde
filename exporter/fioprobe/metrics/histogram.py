"""Turn one fio latency block into counts per contract bucket.

Two sources, in order of trust:
- json+ `bins`: fio's own log-linear histogram (at most 1/128 relative error per bin). Each
  bin's representative latency goes to the first bucket whose `le` is at or above it, so the
  `le="0.01"` bucket counts exactly the samples fio binned at or below 10 ms.
- percentiles: plain json and old fio have only percentile points. The count at or below
  each bucket bound is the most the points allow (see `counts_from_percentiles`), so the
  count above a threshold is never overstated; marked in
  fioprobe_info{histogram_source="percentiles"}. With neither, no bucket is invented.

`op_histogram` applies them to one operation of a run, and `cumulative` turns its counts into
Prometheus buckets. Both directions of the conversion live here, beside the bucket bounds
they depend on, so that everything that shows a run's buckets (the collector, the report, the
totals across runs in `fioprobe.metrics.totals`) takes them from one place without reaching
into persistence.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right

from fioprobe.fio.model import Bins, LatencyStats, OpStats, Run
from fioprobe.metrics.table import EXPORTED_OPS, LATENCY_BUCKETS_SECONDS

#: Bucket bounds in integer nanoseconds: bin keys are integers, so the comparison is exact.
_BOUNDS_NS: tuple[int, ...] = tuple(round(le * 1e9) for le in LATENCY_BUCKETS_SECONDS)
#: Number of buckets including +Inf.
BUCKET_COUNT = len(_BOUNDS_NS) + 1
#: The bucket bounds of every latency histogram in seconds, +Inf included.
BUCKET_BOUNDS_SECONDS: tuple[float, ...] = (*LATENCY_BUCKETS_SECONDS, math.inf)


def le_label(bound: float) -> str:
    """A bucket bound as its `le` label value: 0.0001 ... 8.192, +Inf."""
    return "+Inf" if bound == math.inf else f"{bound:g}"


#: The `le` label of every bucket, in order: what fioprobe pushes.
LE_LABELS: tuple[str, ...] = tuple(map(le_label, BUCKET_BOUNDS_SECONDS))
#: fio splits every power of two of latency into 64 bins (FIO_IO_U_PLAT_BITS = 6), in every
#: version that writes percentiles; a bin is therefore at most 1/64 of its value wide.
FIO_BINS_PER_OCTAVE = 64


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


def counts_from_percentiles(latency: LatencyStats, samples: int) -> list[int] | None:
    """Per-bucket counts from fio's percentile points, `samples` in total; None if unknown.

    fio reports a point (p, v) when the sample of rank r = ceil(p% x samples) falls in its
    latency bin whose middle is v. So every sample below that bin ranks below r: for a bound
    `le` under the bin, at most r - 1 samples are at or below `le`. That upper end, from the
    first point whose bin starts above `le`, is what is exported: the histogram then never
    claims more samples above a threshold (10 ms) than fio measured, and its p99 lands in
    the bucket of fio's own p99. A bin spans at most 1/64 of its value (fio's 64 bins per
    power of two), so it starts no lower than v - v/64. Beyond the last point, all samples
    are at or below `le` when fio's max is, else all but one (the max itself is above); min
    and max are exact. Without any point, buckets are known only when min and max share
    one; otherwise None: no bucket is invented (the run adds to no bucket, only its summary).
    """
    if samples <= 0:
        return [0] * BUCKET_COUNT
    points = sorted(latency.percentiles.items())  # by percent; values rise with it
    if not points:
        first = bisect_left(_BOUNDS_NS, round(latency.min_s * 1e9))
        if first != bisect_left(_BOUNDS_NS, round(latency.max_s * 1e9)):
            return None
        counts = [0] * BUCKET_COUNT
        counts[first] = samples
        return counts
    bins = [(pct, value - value / FIO_BINS_PER_OCTAVE) for pct, value in points]
    counts = [0] * BUCKET_COUNT
    previous = 0
    for index, le in enumerate(LATENCY_BUCKETS_SECONDS):
        if latency.max_s <= le:
            at_or_below = samples
        elif latency.min_s > le:
            at_or_below = 0
        else:
            above = [pct for pct, bin_start in bins if bin_start > le]
            if above:
                rank = math.ceil(samples * above[0] / 100)
                at_or_below = min(samples, max(rank - 1, 0))
            else:
                at_or_below = samples - 1
        at_or_below = max(at_or_below, previous)
        counts[index] = at_or_below - previous
        previous = at_or_below
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


def op_histogram(stats: OpStats) -> tuple[list[int], float, str]:
    """One operation's bucket counts, sum of latencies, and the source used.

    With source "none" the run adds nothing to the histogram: fio gave neither bins nor
    percentiles that place its samples, and a guessed bucket could fire an alert.
    """
    source = _source(stats)
    latency = stats.latency
    if source == "none" or latency is None:
        return [0] * BUCKET_COUNT, 0.0, "none"
    samples = stats.sample_count
    # fio's mean is exact; mean x N is the exact sum of all observed latencies.
    total_seconds = latency.mean_s * samples
    if source == "bins" and latency.bins_ns is not None:  # "bins" says they are there
        return counts_from_bins(latency.bins_ns), total_seconds, source
    counts = counts_from_percentiles(latency, samples)
    if counts is None:
        return [0] * BUCKET_COUNT, 0.0, "none"
    return counts, total_seconds, source


def _source(stats: OpStats) -> str:
    """Which source `op_histogram` uses, without computing the counts."""
    latency = stats.latency
    if latency is None or stats.sample_count == 0:
        return "none"
    if latency.bins_ns:
        return "bins"
    if latency.percentiles:
        return "percentiles"
    if latency.max_s and counts_from_percentiles(latency, 1) is not None:
        return "percentiles"  # min and max in one bucket: placed exactly
    return "none"


def histogram_source(run: Run) -> str:
    """The weakest source any exported histogram of this run came from."""
    sources = {
        _source(stats)
        for job in run.jobs
        for op, stats in job.ops.items()
        if op in EXPORTED_OPS and stats.sample_count > 0
    }
    for source in ("none", "percentiles", "bins"):
        if source in sources:
            return source
    return "none"
