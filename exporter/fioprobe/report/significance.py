"""The statistics behind the report's verdict: an exact rank test, Holm's correction, effect sizes.

Pure Python on purpose: the samples are a handful of runs per configuration, where exact
answers are cheap and large-sample approximations are wrong, and the report must not pull in
a numerical stack for a few sums.

- `mann_whitney`: the two-sided Mann-Whitney U test with its *exact* permutation
  distribution, ties included (runs that give the same count of slow fsyncs, say): every way
  of splitting the pooled runs into two groups of the observed sizes is counted, so the p-value
  is exact up to `EXACT_LIMIT` pooled runs; beyond it, where counting gets slow, the normal
  approximation is used and `RankTest.exact` says so.
- `smallest_p`: the least p-value the test can give with n and m runs at all (2 / C(n+m, n),
  for groups that do not overlap): whether enough runs were made to ever call a difference.
- `holm`: Holm-Bonferroni adjusted p-values, so that testing many jobs and metrics at once
  keeps the chance of any false call at alpha.
- `ratio_estimate` / `shift_estimate`: Hodges-Lehmann estimates of how large the difference
  is (the median over all pairs of runs), the effect size a verdict also needs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Up to this many pooled runs the exact distribution is counted (about 5 ms at 30 + 30 runs,
#: 80 ms at 50 + 50); counting grows as N^4 (2.4 s at 100 + 100), so beyond it the normal
#: approximation is used. It is not exact there: at 50 + 50 runs, on 60 samples of each kind
#: with an exact p between 1e-4 and 0.2, its p was 0.99 to 1.33 times the exact one for
#: continuous values and 0.97 to 1.18 for small counts with many ties (other ties may differ
#: more). So a p can jump by that much where the pooled runs pass this limit.
EXACT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class RankTest:
    """The outcome of `mann_whitney` for `candidate` against `baseline`."""

    #: U of the candidate sample: pairs (baseline, candidate) where the candidate is larger,
    #: ties counting one half. 0 to n*m; n*m/2 when neither tends to be larger.
    u: float
    #: Two-sided p-value: twice the smaller tail of U's distribution, at most 1.
    p: float
    #: True for the exact permutation distribution; False beyond `EXACT_LIMIT` pooled runs,
    #: where the normal approximation (tie and continuity corrected) is used.
    exact: bool = True


def mann_whitney(baseline: Sequence[float], candidate: Sequence[float]) -> RankTest:
    """Two-sided exact Mann-Whitney U test (ties by mid-ranks, exact conditional distribution).

    The p-value is the share of all C(n+m, n) splits of the pooled values whose candidate
    rank sum is at least as far into the same tail as the observed one, doubled (as R's and
    SciPy's exact tests do). With ties the ranks are mid-ranks and the distribution is that of
    those mid-ranks, computed by counting subsets, so it stays exact.
    """
    n, m = len(baseline), len(candidate)
    if n == 0 or m == 0:
        raise ValueError("both samples need at least one value")
    pooled = sorted([*baseline, *candidate])
    doubled = _doubled_midranks(pooled)
    rank_of = {value: rank for value, rank in zip(pooled, doubled, strict=True)}
    observed = sum(rank_of[value] for value in candidate)
    u = observed / 2 - m * (m + 1) / 2
    if n + m > EXACT_LIMIT:
        return RankTest(u, _normal_p(u, n, m, pooled), exact=False)
    size = m
    if n < m:
        # Counting costs grow with the subset size: the baseline's rank sum (all ranks minus
        # the candidate's) lies exactly as far into the other tail, so the p is the same.
        observed, size = sum(doubled) - observed, n
    distribution = _subset_sum_counts(doubled, size)
    total = math.comb(n + m, m)
    lower = sum(count for s, count in distribution.items() if s <= observed)
    upper = sum(count for s, count in distribution.items() if s >= observed)
    p = min(1.0, 2 * min(lower, upper) / total)
    return RankTest(u, p)


def _normal_p(u: float, n: int, m: int, pooled: Sequence[float]) -> float:
    """Two-sided p of U from the normal approximation, with tie and continuity corrections."""
    size = n + m
    ties = sum(t**3 - t for t in _tie_sizes(pooled))
    variance = n * m / 12 * ((size + 1) - ties / (size * (size - 1)))
    if variance <= 0:
        return 1.0
    distance = max(0.0, abs(u - n * m / 2) - 0.5)
    return min(1.0, math.erfc(distance / math.sqrt(variance) / math.sqrt(2)))


def _tie_sizes(ordered: Sequence[float]) -> list[int]:
    sizes: list[int] = []
    for index, value in enumerate(ordered):
        if index and ordered[index - 1] == value:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes


def _doubled_midranks(ordered: Sequence[float]) -> list[int]:
    """Twice the mid-rank of each value of a sorted list: integers, so sums count exactly."""
    ranks: list[int] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[start]:
            end += 1
        # ranks start..end (1-based start+1..end+1) share their mean, doubled: start+end+2
        ranks += [start + end + 2] * (end - start + 1)
        start = end + 1
    return ranks


def _subset_sum_counts(weights: Sequence[int], size: int) -> dict[int, int]:
    """How many subsets of `size` of `weights` have each sum (the rank-sum distribution).

    The counting polynomial of k-subsets (coefficient of x^s: subsets with sum s) is held
    as one Python integer with a fixed-width field per power of x, so adding a weight is a
    shift and an addition of whole integers: C speed, no loop over the sums.
    """
    width = (math.comb(len(weights), size).bit_length() + 8) // 8 * 8  # bits, whole bytes
    polys = [1] + [0] * size  # polys[k]: the polynomial of the k-subsets seen so far
    for seen, weight in enumerate(weights):
        shift = weight * width
        for k in range(min(size, seen + 1), 0, -1):
            polys[k] += polys[k - 1] << shift
    field_bytes = width // 8
    data = polys[size].to_bytes((polys[size].bit_length() + 7) // 8 + field_bytes, "little")
    counts = {}
    for total in range(len(data) // field_bytes):
        count = int.from_bytes(data[total * field_bytes : (total + 1) * field_bytes], "little")
        if count:
            counts[total] = count
    return counts


def smallest_p(n: int, m: int) -> float:
    """The least two-sided p `mann_whitney` can give for n and m runs: 2 / C(n+m, n).

    Reached only when every run of one group lies beyond every run of the other; ties make
    it larger. Below alpha divided by the number of tests, no difference can be called.
    """
    return min(1.0, 2 / math.comb(n + m, n))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given.

    The k-th smallest of K p-values is multiplied by K - k + 1, and an adjusted value is never
    below the one before it in that order (step-down): a hypothesis is rejected at alpha
    exactly when Holm's procedure rejects it, and the chance of any false rejection among
    all K stays at most alpha whatever the dependence between the tests.
    """
    count = len(p_values)
    order = sorted(range(count), key=lambda i: p_values[i])
    adjusted = [1.0] * count
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (count - position) * p_values[index]))
        adjusted[index] = running
    return adjusted


def ratio_estimate(baseline: Sequence[float], candidate: Sequence[float]) -> float | None:
    """Hodges-Lehmann ratio: the median over all pairs of candidate / baseline (on logs).

    The effect size for a metric that changes by factors (IOPS, latency): robust to one odd
    run, and zero effect exactly when the rank test sees no tendency. None when a value is not
    positive (a ratio has no meaning there).
    """
    if any(v <= 0 for v in (*baseline, *candidate)):
        return None
    # One log per run, not two per pair: the pairs are n*m, the runs only n+m.
    base_logs = [math.log(b) for b in baseline]
    cand_logs = [math.log(c) for c in candidate]
    return math.exp(statistics.median([c - b for b in base_logs for c in cand_logs]))


def shift_estimate(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Hodges-Lehmann shift: the median over all pairs of candidate - baseline (for counts)."""
    return statistics.median([c - b for b in baseline for c in candidate])


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean and sample standard deviation of one metric over repeated runs."""

    n: int
    mean: float
    #: Sample standard deviation (n - 1); 0 for a single run.
    stddev: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("no values")
        stddev = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(len(values), statistics.fmean(values), stddev)
