"""The verdict of a candidate group against the baseline: regression, improvement or neither.

A CBT-style comparison of repeated runs. For every job both groups ran, and every metric of
`METRICS` the runs have, the candidate's runs are compared with the baseline's:

- the test: two-sided Mann-Whitney U with its exact distribution (`significance.mann_whitney`).
  It asks only whether one group's runs tend to lie above the other's, so it needs no
  assumption about how run-to-run noise is distributed (latency maxima are anything but
  normal) and one wild run moves it by one rank, not by its size;
- the correction: every test of one candidate against the baseline is one family, Holm-
  Bonferroni adjusted at `alpha` (0.05): per candidate, the chance that the verdict of an
  unchanged configuration calls *any* of its jobs and metrics is at most 5 %, however many
  it has. A report of several candidates has a family each, so its chance of some false
  call somewhere grows with the number of candidates (up to k x 5 % for k);
- the effect: a difference beyond the noise is called only when it is also large enough to
  matter, `Metric.min_effect` (the Hodges-Lehmann ratio over all pairs of runs at least
  x1.10 or at most 1/1.10, x1.5 for the max latency; for the slow-fsync count a shift of at
  least one fsync per run);
- too few runs: fewer than `Settings.min_runs` (5) per group, or fewer than the family needs
  to ever reach significance (with 5 and 5 runs the smallest p is 2/252 = 0.0079, so at most 6
  tests can be corrected for), is said as "too few runs", never hidden in "no significant
  change".

Each candidate is its own family: it answers "did this configuration change against the
baseline", as if its report held only these two groups.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fioprobe.metrics.histogram import BUCKET_BOUNDS_SECONDS, op_histogram
from fioprobe.report import analysis as an
from fioprobe.report import significance as sig
from fioprobe.results.load import Entry
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no significant change"
TOO_FEW = "too few runs"
#: The test, as the report names it.
TEST_NAME = "Mann-Whitney U, two-sided, exact"
CORRECTION_NAME = "Holm-Bonferroni"
#: An fsync slower than this is a slow fsync: etcd's 10 ms, a bucket bound of the contract.
SLOW_FSYNC_SECONDS = ETCD_FSYNC_P99_SECONDS
_SLOW_BUCKET = BUCKET_BOUNDS_SECONDS.index(SLOW_FSYNC_SECONDS)


@dataclass(frozen=True, slots=True)
class Settings:
    #: Family-wise error rate: the chance of any false call among one candidate's tests.
    alpha: float = 0.05
    #: Fewer runs per group than this get no test at all.
    min_runs: int = 5


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    title: str
    #: "per second", "bytes per second", "seconds" or "count" (slow fsyncs per run).
    unit: str
    #: IOPS and bandwidth: more is better; latency and slow fsyncs: less is better.
    higher_is_better: bool
    #: The value of one run of a job, for the job's characteristic operation.
    value: Callable[[Entry, str], float | None]
    #: Smallest change worth a verdict: a ratio beyond 1 + min_effect (or below its
    #: inverse); for counts a shift of at least max(`min_shift`, min_effect x baseline median).
    min_effect: float = 0.10
    min_shift: float = 0.0


def _iops(entry: Entry, op: str) -> float | None:
    value = an.iops_value(entry, op)
    return None if value is None else value.value


def _bandwidth(entry: Entry, op: str) -> float | None:
    """Bytes per second over all directions that moved data (sync moves none of its own)."""
    moving = [
        stats.bandwidth_bytes_per_second
        for name, stats in entry.job.ops.items()
        if name in ("read", "write", "trim", "mixed") and an.active(stats)
    ]
    return sum(moving) if moving else None


def _percentile(point: float) -> Callable[[Entry, str], float | None]:
    """fio's own percentile (never a bucket estimate: the test compares like with like)."""

    def value(entry: Entry, op: str) -> float | None:
        stats = entry.job.ops.get(op)
        if not an.has_latency(stats):
            return None
        assert stats is not None and stats.latency is not None
        return stats.latency.percentiles.get(point)

    return value


def _max(entry: Entry, op: str) -> float | None:
    stats = entry.job.ops.get(op)
    if not an.has_latency(stats):
        return None
    assert stats is not None and stats.latency is not None
    return stats.latency.max_s


def _slow_fsyncs(entry: Entry, op: str) -> float | None:
    """fsyncs above 10 ms, from fio's json+ histogram (bins) only: percentile points bound
    the count from below, and a lower bound would call a stall smaller than it was."""
    stats = entry.job.ops.get("sync")
    if op != "sync" or stats is None:
        return None
    counts, _, source = op_histogram(stats)
    if source != "bins":
        return None
    return float(sum(counts[_SLOW_BUCKET + 1 :]))


METRICS: tuple[Metric, ...] = (
    Metric("iops", "IOPS", "per second", True, _iops),
    Metric("bandwidth", "bandwidth", "bytes per second", True, _bandwidth),
    Metric("p50", "p50 latency", "seconds", False, _percentile(50.0)),
    Metric("p99", "p99 latency", "seconds", False, _percentile(99.0)),
    # A maximum is one IO of thousands: on a healthy shared disk it moved from 4.3 to 18 ms
    # over eight identical runs, so a change below x1.5 is not worth a call even when the
    # runs separate; a stall (x100 on Ceph peering) is far beyond it.
    Metric("max", "max latency", "seconds", False, _max, min_effect=0.5),
    Metric(
        "slow_fsyncs",
        f"fsyncs above {SLOW_FSYNC_SECONDS * 1e3:g} ms",
        "count",
        False,
        _slow_fsyncs,
        min_shift=1.0,
    ),
)


@dataclass(frozen=True, slots=True)
class Sample:
    """One metric of one job in one group: a value per run."""

    values: list[float]
    sources: list[str]

    @property
    def spread(self) -> sig.Spread:
        return sig.Spread.of(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


@dataclass(slots=True)
class MetricTest:
    """One job and metric of a candidate against the baseline, and what it concluded."""

    row: str
    op: str
    metric: Metric
    baseline: Sample
    candidate: Sample
    test: sig.RankTest | None = None
    #: Holm-adjusted p-value, for the tests of the family.
    p_corrected: float | None = None
    #: Hodges-Lehmann ratio (candidate / baseline), or shift for counts.
    effect: float | None = None
    effect_kind: str = "ratio"
    verdict: str = NO_CHANGE
    reason: str = ""


@dataclass(slots=True)
class CandidateVerdict:
    baseline: str
    candidate: str
    settings: Settings
    tests: list[MetricTest]

    @property
    def family(self) -> list[MetricTest]:
        """The tests Holm corrected for: every one that was run."""
        return [t for t in self.tests if t.test is not None]

    @property
    def regressions(self) -> list[MetricTest]:
        return [t for t in self.tests if t.verdict == REGRESSION]

    @property
    def improvements(self) -> list[MetricTest]:
        return [t for t in self.tests if t.verdict == IMPROVEMENT]

    @property
    def too_few(self) -> list[MetricTest]:
        return [t for t in self.tests if t.verdict == TOO_FEW]


def job_op(entries: Sequence[Entry]) -> str | None:
    """The operation that characterises a job across its runs (sync when it fsyncs)."""
    found = Counter(op for op in map(an.primary_op, entries) if op is not None)
    if not found:
        return None
    return "sync" if "sync" in found else found.most_common(1)[0][0]


def samples(entries: Sequence[Entry], op: str, metric: Metric) -> Sample:
    """One value per run: per fio output file and node, the median of its entries' values.

    The test takes its values as independent runs. A job repeated within one output (the
    same job stonewalled twice, say) is parts of one run under one set of conditions, so it
    counts once; several nodes of one run in one output (fio's client/server mode) count
    once each, as their own outputs would.
    """
    per_run: dict[tuple[str, str | None], list[float]] = {}
    for entry in entries:
        value = metric.value(entry, op)
        if value is not None and math.isfinite(value):
            per_run.setdefault((entry.source, entry.node), []).append(value)
    values = [statistics.median(found) for found in per_run.values()]
    return Sample(values, [source for source, _ in per_run])


def by_row_and_group(entries: Sequence[Entry]) -> dict[str, dict[str, list[Entry]]]:
    placed: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        placed[entry.row][entry.group].append(entry)
    return placed


def verdicts(
    entries: Sequence[Entry], baseline: str | None, settings: Settings | None = None
) -> list[CandidateVerdict]:
    """Every other group against `baseline`, one family of tests per candidate."""
    if baseline is None:
        return []
    settings = settings or Settings()
    placed = by_row_and_group(entries)
    candidates = sorted({e.group for e in entries} - {baseline}, key=an.natural_key)
    result = []
    for candidate in candidates:
        tests = []
        for row in sorted(placed, key=an.natural_key):
            groups = placed[row]
            if baseline not in groups or candidate not in groups:
                continue
            op = job_op([*groups[baseline], *groups[candidate]])
            if op is None:
                continue
            for metric in METRICS:
                base = samples(groups[baseline], op, metric)
                cand = samples(groups[candidate], op, metric)
                if base.values and cand.values:
                    tests.append(MetricTest(row, op, metric, base, cand))
        if tests:
            result.append(CandidateVerdict(baseline, candidate, settings, decide(tests, settings)))
    return result


def decide(tests: list[MetricTest], settings: Settings) -> list[MetricTest]:
    """Run the family's tests, correct them together, and give each its verdict."""
    for test in tests:
        n, m = len(test.baseline.values), len(test.candidate.values)
        if min(n, m) < settings.min_runs:
            test.verdict = TOO_FEW
            test.reason = f"{n} and {m} runs: at least {settings.min_runs} per group are needed"
        elif len(set(test.baseline.values) | set(test.candidate.values)) == 1:
            # Nothing varies, so there is nothing to test; leaving it out of the family is
            # valid because the choice depends on the pooled runs only, not on the split.
            test.reason = "every run gave the same value"
        else:
            test.test = sig.mann_whitney(test.baseline.values, test.candidate.values)
    family = [t for t in tests if t.test is not None]
    corrected = sig.holm([t.test.p for t in family if t.test is not None])
    size = len(family)
    for test, p_corrected in zip(family, corrected, strict=True):
        test.p_corrected = p_corrected
        _effect(test)
        _conclude(test, size, settings)
    return tests


def _effect(test: MetricTest) -> None:
    """A ratio for rates and latencies, a shift per run for counts; None when a rate or a
    latency has a run at 0 or below: a ratio has no meaning there, and a shift in its place
    would be held to 10 % of a median that may be 0, so any shift at all would be called."""
    base, cand = test.baseline.values, test.candidate.values
    if test.metric.unit == "count":
        test.effect, test.effect_kind = sig.shift_estimate(base, cand), "shift"
    else:
        test.effect, test.effect_kind = sig.ratio_estimate(base, cand), "ratio"


def large_enough(test: MetricTest) -> bool:
    """Whether the estimated difference reaches the metric's minimum effect."""
    metric, effect = test.metric, test.effect
    if effect is None:
        return False
    if test.effect_kind == "ratio":
        return abs(math.log(effect)) >= math.log1p(metric.min_effect) if effect > 0 else False
    floor = max(metric.min_shift, metric.min_effect * abs(test.baseline.median))
    return abs(effect) >= floor and effect != 0


def worse(test: MetricTest) -> bool:
    """Whether the estimated difference goes the bad way for this metric."""
    assert test.effect is not None
    up = test.effect > 1 if test.effect_kind == "ratio" else test.effect > 0
    return up != test.metric.higher_is_better


def _conclude(test: MetricTest, family_size: int, settings: Settings) -> None:
    assert test.test is not None and test.p_corrected is not None
    alpha = settings.alpha
    n, m = len(test.baseline.values), len(test.candidate.values)
    p_text = f"p = {test.test.p:.3g}, {test.p_corrected:.3g} corrected for {family_size} tests"
    if test.p_corrected <= alpha:
        if test.effect is None:
            test.verdict = NO_CHANGE
            test.reason = (
                f"beyond the noise ({p_text}) but a run gave 0 or less, so no ratio can size "
                "the change: not called"
            )
        elif large_enough(test):
            test.verdict = REGRESSION if worse(test) else IMPROVEMENT
            test.reason = f"{p_text}; {effect_text(test)} beyond {minimum_text(test)}"
        else:
            test.verdict = NO_CHANGE
            test.reason = (
                f"beyond the noise ({p_text}) but {effect_text(test)} is below the minimum "
                f"effect ({minimum_text(test)})"
            )
        return
    floor = sig.smallest_p(n, m)
    if floor * family_size > alpha:
        needed = runs_needed(family_size, alpha)
        test.verdict = TOO_FEW
        test.reason = (
            f"with {n} and {m} runs the smallest possible p is {floor:.2g}, and {family_size} "
            f"tests at once need {alpha / family_size:.2g} (alpha / {family_size}): "
            f"{needed} runs per group would do"
        )
        return
    test.verdict = NO_CHANGE
    test.reason = f"{p_text}, above {alpha:g}"


def runs_needed(family_size: int, alpha: float) -> int:
    """Runs per group for which the exact test can reach alpha / family_size at all."""
    runs = 2
    while sig.smallest_p(runs, runs) * family_size > alpha:
        runs += 1
    return runs


def effect_text(test: MetricTest) -> str:
    if test.effect is None:
        return "no effect estimate"
    if test.effect_kind == "ratio":
        return f"×{test.effect:.3g}"
    return f"{test.effect:+g} per run"


def minimum_text(test: MetricTest) -> str:
    metric = test.metric
    if test.effect_kind == "ratio":
        return f"×{1 + metric.min_effect:g} either way"
    return f"{max(metric.min_shift, metric.min_effect * abs(test.baseline.median)):g} per run"


def spreads(entries: Sequence[Entry]) -> dict[str, dict[str, dict[str, sig.Spread]]]:
    """row -> group -> metric -> mean and standard deviation, where a job ran 2+ times."""
    result: dict[str, dict[str, dict[str, sig.Spread]]] = {}
    for row, groups in sorted(
        by_row_and_group(entries).items(), key=lambda i: an.natural_key(i[0])
    ):
        op = job_op([e for members in groups.values() for e in members])
        if op is None:
            continue
        for group, members in sorted(groups.items(), key=lambda i: an.natural_key(i[0])):
            if len(members) < 2:
                continue
            for metric in METRICS:
                sample = samples(members, op, metric)
                if len(sample.values) >= 2:
                    result.setdefault(row, {}).setdefault(group, {})[metric.key] = sample.spread
    return result
