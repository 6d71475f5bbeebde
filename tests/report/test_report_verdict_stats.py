"""The statistics of the report's verdict against values computed by hand.

Exact Mann-Whitney p-values are counts of subsets: with n and m runs there are C(n+m, n) ways
to split the pooled runs, and the two-sided p is twice the share of splits at least as
extreme as the observed one. Each expected value below is such a count, worked out in the
comment beside it. The real runs (identical configurations, the slow FUSE disk) are in
test_report_verdict.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from types import SimpleNamespace
from typing import cast

import pytest
from fioprobe.report import significance as sig
from fioprobe.report import verdict as vd
from fioprobe.results.load import Entry


def test_exact_u_complete_separation() -> None:
    # One split of 252 (C(10, 5)) puts all five candidates above: p = 2 / 252.
    result = sig.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert result.u == 25 and result.p == 2 / 252 and result.exact
    # The other direction: U = 0, the same p.
    assert sig.mann_whitney([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == sig.RankTest(0, 2 / 252)
    # Three and three: 2 / C(6, 3) = 2 / 20; four and three: 2 / C(7, 3) = 2 / 35.
    assert sig.mann_whitney([1, 2, 3], [4, 5, 6]).p == 0.1
    assert sig.mann_whitney([1, 2, 3, 4], [5, 6, 7]).p == 2 / 35


def test_exact_u_partial_overlap() -> None:
    # Candidate ranks 3, 5, 6: rank sum 14, U = 14 - 6 = 8. Of the 20 splits of 3 + 3, U >= 8
    # for the candidate ranks {3,5,6} (U=8) and {4,5,6} (U=9): 2 of 20, so p = 2 x 2/20.
    result = sig.mann_whitney([1, 2, 4], [3, 5, 6])
    assert result.u == 8 and math.isclose(result.p, 0.2)
    # Swapping the groups mirrors U (n*m - U) and keeps p.
    swapped = sig.mann_whitney([3, 5, 6], [1, 2, 4])
    assert swapped.u == 1 and math.isclose(swapped.p, 0.2)


def test_exact_u_with_ties() -> None:
    # Seven zeros share ranks 1-7 (mid-rank 4); 1, 2, 3 have ranks 8, 9, 10. The candidate
    # {0, 0, 1, 2, 3} has rank sum 4+4+8+9+10 = 35, U = 35 - 15 = 20. Splits with rank sum
    # >= 35 must hold 8, 9 and 10 plus two of the seven zeros: C(7, 2) = 21 of 252, p = 42/252.
    result = sig.mann_whitney([0, 0, 0, 0, 0], [0, 1, 2, 0, 3])
    assert result.u == 20 and math.isclose(result.p, 42 / 252)
    # Nothing differs: every split is as extreme as the observed one.
    assert sig.mann_whitney([7.0] * 5, [7.0] * 5).p == 1.0


def test_exact_u_agrees_with_enumeration() -> None:
    """On random data with ties, the counted distribution equals brute-force enumeration."""
    rng = random.Random(7)
    for _ in range(20):
        base = [rng.randint(0, 4) for _ in range(rng.randint(2, 6))]
        cand = [rng.randint(0, 4) for _ in range(rng.randint(2, 6))]
        assert math.isclose(sig.mann_whitney(base, cand).p, _enumerated_p(base, cand))


def _enumerated_p(base: list[int], cand: list[int]) -> float:
    """Two-sided p by listing every split of the pooled values (U with ties as one half)."""
    pooled = base + cand

    def u(b: list[int], c: list[int]) -> float:
        return sum((x > y) + 0.5 * (x == y) for x in c for y in b)

    observed = u(base, cand)
    lower = upper = total = 0
    for chosen in itertools.combinations(range(len(pooled)), len(cand)):
        c = [pooled[i] for i in chosen]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        value = u(b, c)
        total += 1
        lower += value <= observed
        upper += value >= observed
    return min(1.0, 2 * min(lower, upper) / total)


def test_normal_approximation_beyond_the_exact_limit() -> None:
    base = [float(i) for i in range(60)]
    cand = [float(i) + 45 for i in range(60)]
    result = sig.mann_whitney(base, cand)
    # Candidates 45..59 are above 45..59 baselines and tie one each; 60..104 are above all 60.
    assert not result.exact and result.u == sum(range(45, 60)) + 15 * 0.5 + 45 * 60
    assert 0 < result.p < 1e-10
    # Where both apply (25 + 25 overlapping runs), the approximation is close to the count.
    low, high = base[:25], [v - 40 for v in cand[:25]]
    near = sig.mann_whitney(low, high)
    assert near.exact
    assert near.p == pytest.approx(sig._normal_p(near.u, 25, 25, sorted(low + high)), rel=0.1)


def test_smallest_p_and_runs_needed() -> None:
    assert sig.smallest_p(5, 5) == 2 / 252
    assert sig.smallest_p(6, 6) == 2 / 924
    assert sig.smallest_p(2, 2) == 2 / 6
    # 6 tests at 5 runs: 6 x 2/252 = 0.0476 <= 0.05; 7 tests need 6 runs (7 x 2/924 = 0.015).
    assert vd.runs_needed(6, 0.05) == 5
    assert vd.runs_needed(7, 0.05) == 6
    # 6 runs carry up to 23 tests (23 x 2/924 = 0.0498); the 24th needs 7.
    assert vd.runs_needed(23, 0.05) == 6
    assert vd.runs_needed(24, 0.05) == 7
    assert vd.runs_needed(1, 0.05) == 4  # 2/70 = 0.029; 3 + 3 give only 0.1


def test_holm_order_and_step_down() -> None:
    # Sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06
    # (never below the one before it), returned in the input order.
    assert sig.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sig.holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert sig.holm([0.02, 0.02]) == [0.04, 0.04]  # equal p-values, equal adjusted values
    assert sig.holm([]) == []


def test_hodges_lehmann_estimates() -> None:
    # Pairwise ratios 2/1, 4/1, 2/2, 4/2 = 2, 4, 1, 2: median on logs (log 1, log 2, log 2,
    # log 4) is log 2.
    assert sig.ratio_estimate([1, 2], [2, 4]) == pytest.approx(2.0)
    assert sig.ratio_estimate([0, 2], [2, 4]) is None
    # Pairwise differences 1, 3, 1, 3: median 2.
    assert sig.shift_estimate([0, 0], [1, 3]) == 2


def test_spread_is_mean_and_sample_stddev() -> None:
    spread = sig.Spread.of([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert spread.n == 8 and spread.mean == 5.0
    assert spread.stddev == pytest.approx(math.sqrt(32 / 7))
    assert sig.Spread.of([3.0]).stddev == 0.0


# --- verdicts from samples ---------------------------------------------------------------

_METRIC = {m.key: m for m in vd.METRICS}


def _test(metric: str, base: list[float], cand: list[float], row: str = "job") -> vd.MetricTest:
    return vd.MetricTest(
        row,
        "sync",
        _METRIC[metric],
        vd.Sample(base, ["b"] * len(base)),
        vd.Sample(cand, ["c"] * len(cand)),
    )


BASE = [1.00, 1.02, 0.98, 1.01, 0.99]


def test_regression_and_improvement_follow_the_metric_direction() -> None:
    slower = [v * 2 for v in BASE]
    tests = vd.decide(
        [
            _test("p99", BASE, slower),  # latency up: regression
            _test("iops", BASE, slower),  # IOPS up: improvement
            _test("p50", slower, BASE),  # latency down: improvement
            _test("bandwidth", slower, BASE),  # bandwidth down: regression
        ],
        vd.Settings(),
    )
    assert [t.verdict for t in tests] == [vd.REGRESSION, vd.IMPROVEMENT, vd.IMPROVEMENT,
                                          vd.REGRESSION]  # fmt: skip
    for test in tests:
        assert test.test is not None and test.test.p == 2 / 252
        assert test.p_corrected == pytest.approx(4 * 2 / 252)  # Holm, all tied at the minimum
    assert tests[0].effect == pytest.approx(2.0)


def test_beyond_noise_but_below_the_minimum_effect() -> None:
    # Separated, but 3 % slower: the rank test sees it, the verdict does not call it.
    (test,) = vd.decide([_test("p99", BASE, [v * 1.03 + 0.03 for v in BASE])], vd.Settings())
    assert test.p_corrected is not None and test.p_corrected < 0.05
    assert test.verdict == vd.NO_CHANGE and "below the minimum effect" in test.reason


def test_overlapping_runs_are_no_significant_change() -> None:
    (test,) = vd.decide([_test("p99", BASE, [0.97, 1.03, 1.0, 1.015, 0.995])], vd.Settings())
    assert test.verdict == vd.NO_CHANGE and test.p_corrected is not None
    assert test.p_corrected > 0.05


def test_too_few_runs_is_said_not_hidden() -> None:
    # Four runs: below the minimum of five, no test at all.
    (few,) = vd.decide([_test("p99", BASE[:4], [2.0] * 4)], vd.Settings())
    assert few.verdict == vd.TOO_FEW and few.test is None
    # Seven tests of 5 + 5 runs: even complete separation gives 7 x 2/252 = 0.056 > 0.05.
    tests = vd.decide(
        [_test("p99", BASE, [0.97, 1.03, 1.0, 1.015, 0.995], row=f"job{i}") for i in range(7)],
        vd.Settings(),
    )
    assert {t.verdict for t in tests} == {vd.TOO_FEW}
    assert "6 runs per group would do" in tests[0].reason
    # ... but a difference Holm's step-down reaches is still called: with a test of 8 + 8
    # runs rejected first (7 x 2/12870), the 5 + 5 one is corrected by 6, not 7:
    # 6 x 2/252 = 0.048 <= 0.05, although 7 x 2/252 alone would not be.
    eight = [1.0 + i / 100 for i in range(8)]
    tests = vd.decide(
        [_test("iops", eight, [v * 3 for v in eight], row="many"),
         _test("p99", BASE, [v * 3 for v in BASE], row="five"),
         *[_test("p99", BASE, [0.97, 1.03, 1.0, 1.015, 0.995], row=f"j{i}") for i in range(5)]],
        vd.Settings(),
    )  # fmt: skip
    assert tests[0].p_corrected == pytest.approx(7 * 2 / 12870)
    assert tests[1].p_corrected == pytest.approx(6 * 2 / 252)
    assert [t.verdict for t in tests[:2]] == [vd.IMPROVEMENT, vd.REGRESSION]
    assert {t.verdict for t in tests[2:]} == {vd.TOO_FEW}


def test_identical_values_leave_the_family() -> None:
    tests = vd.decide(
        [_test("slow_fsyncs", [0.0] * 5, [0.0] * 5), _test("p99", BASE, [v * 2 for v in BASE])],
        vd.Settings(),
    )
    assert tests[0].verdict == vd.NO_CHANGE and tests[0].test is None
    assert "same value" in tests[0].reason
    assert tests[1].p_corrected == 2 / 252  # a family of one


def test_slow_fsync_count_needs_a_shift_of_one_per_run() -> None:
    # Stalled runs: 0 slow fsyncs on every healthy run, 2 to 6 on every stalled one.
    (stall,) = vd.decide([_test("slow_fsyncs", [0.0] * 5, [2.0, 3.0, 6.0, 2.0, 4.0])],
                         vd.Settings())  # fmt: skip
    assert stall.verdict == vd.REGRESSION and stall.effect_kind == "shift"
    assert stall.effect == 3.0
    # Separated, but by less than one fsync per run (a baseline of 40 needs a shift of 4).
    (small,) = vd.decide([_test("slow_fsyncs", [40, 41, 40, 41, 40], [42, 43, 42, 43, 42])],
                         vd.Settings())  # fmt: skip
    assert small.verdict == vd.NO_CHANGE and "below the minimum effect" in small.reason


def test_exact_test_counts_with_the_smaller_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subset counting runs over the smaller group whichever side it is on (its cost
    grows with the subset size), and the p does not depend on which side was counted."""
    sizes: list[int] = []
    counts = sig._subset_sum_counts

    def recording(weights: list[int], size: int) -> dict[int, int]:
        sizes.append(size)
        return counts(weights, size)

    monkeypatch.setattr(sig, "_subset_sum_counts", recording)
    rng = random.Random(3)
    few = [rng.random() for _ in range(5)]
    many = [rng.random() + 0.2 for _ in range(95)]
    forward, backward = sig.mann_whitney(few, many), sig.mann_whitney(many, few)
    assert sizes == [5, 5]
    assert forward.u == 5 * 95 - backward.u and math.isclose(forward.p, backward.p)
    # Small unequal groups both ways round, with ties, against listing every split.
    for base, cand in (([1, 3, 3], [2, 3, 4, 5, 6, 0]), ([2, 3, 4, 5, 6, 0], [1, 3, 3])):
        assert math.isclose(sig.mann_whitney(base, cand).p, _enumerated_p(base, cand))


def _called(row: str, metric: str, verdict: str) -> vd.MetricTest:
    test = _test(metric, BASE, [v * 2 for v in BASE], row=row)
    test.test, test.p_corrected, test.effect = sig.RankTest(25, 2 / 252), 0.01, 2.0
    test.verdict = verdict
    return test


def test_command_lines_are_capped() -> None:
    """20 candidates of 30 jobs: one line per job would be 600; the command prints the jobs
    with something to say up to its cap and counts the rest, and at most ten regressions."""
    from fioprobe.report import verdict_view as view

    settings = vd.Settings()
    busy = [
        _called(f"job{i}", "p99", vd.REGRESSION) if i < 12 else _test("p99", BASE, BASE, f"job{i}")
        for i in range(30)
    ]
    verdicts = [vd.CandidateVerdict("base", "c0", settings, busy)]
    for index in range(1, 20):
        quiet = [_test("p99", BASE, BASE, row=f"job{i}") for i in range(30)]
        verdicts.append(vd.CandidateVerdict("base", f"c{index}", settings, quiet))
    lines = view.command_lines(verdicts)
    assert len(lines) == 1 + (5 + 1) + 19 + (10 + 1)
    assert [line for line in lines if line.startswith("  c0: job")] == [
        f"  c0: job{i}: regression (p99 ×2 p=0.01)" for i in range(5)
    ]
    assert "  c0: 25 more of 30 jobs (7 with a call or too few runs, 18 with no significant " \
        "change): see the report's verdict section" in lines  # fmt: skip
    assert "  c7: 30 more of 30 jobs (30 with no significant change): see the report's " \
        "verdict section" in lines  # fmt: skip
    assert lines[-1] == "regression: 2 more, every one in the report's verdict section"
    # Up to the cap every job keeps its own line.
    few = vd.CandidateVerdict("base", "few", settings, busy[:2] + busy[20:23])
    assert len(view.command_lines([few])) == 1 + 5 + 2


def test_time_order_splits_show_what_drift_does() -> None:
    """bench/verdict_calibration.py's splits, on runs of one configuration that drift +4 % a
    run and have no other noise: all of A then all of B is a regression on every window (the
    drift alone separates the groups, x1.04^5 = 1.22 beyond the x1.1 minimum), alternating
    A, B is never called. Random splits cannot show this: their labels ignore time."""
    import verdict_calibration as calibration

    drifting = [1.04**run for run in range(30)]
    rng = random.Random(1)
    blocks = calibration.splits("blocks", 30, 5, 0, rng)
    interleaved = calibration.splits("interleaved", 30, 5, 0, rng)
    assert blocks[0] == ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9]) and len(blocks) == 21
    assert interleaved[-1] == ([20, 22, 24, 26, 28], [21, 23, 25, 27, 29])
    for base, cand in calibration.splits("random", 30, 5, 50, rng):
        assert len(set(base) | set(cand)) == 10 and set(base) | set(cand) <= set(range(30))

    def verdict(base: list[int], cand: list[int]) -> str:
        values = [drifting[i] for i in base], [drifting[i] for i in cand]
        (test,) = vd.decide([_test("p50", *values)], vd.Settings())
        return test.verdict

    assert {verdict(*split) for split in blocks} == {vd.REGRESSION}
    assert {verdict(*split) for split in interleaved} == {vd.NO_CHANGE}


def test_a_ratio_metric_with_a_zero_run_gets_no_effect_and_no_call() -> None:
    # Separated (p = 2/252), but a baseline run of 0 IOPS leaves no ratio; a shift in its
    # place would face a minimum of 10 % of the baseline's median (1.0 here, so 0.1) and call.
    zero = [0.0, 1.0, 1.01, 0.99, 1.02]
    (test,) = vd.decide([_test("iops", zero, [v + 3 for v in zero])], vd.Settings())
    assert test.test is not None and test.test.p == 2 / 252
    assert test.effect is None and test.effect_kind == "ratio"
    assert test.verdict == vd.NO_CHANGE and "no ratio" in test.reason
    # The slow-fsync count is a count: its zeros are values and it keeps its shift.
    (count,) = vd.decide([_test("slow_fsyncs", zero, [v + 3 for v in zero])], vd.Settings())
    assert count.effect == 3.0 and count.verdict == vd.REGRESSION


def test_holm_keeps_every_split_of_identical_runs_within_alpha(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The correction is what holds the calibration: ten runs whose six metrics rank the runs
    in six different orders (values 2^rank, so every separation is far beyond the minimum
    effect). Of the C(10, 5) = 252 splits at most 12 (5 %) may call anything with Holm; with
    the correction taken out each metric alone calls on its 8 splits with p <= 0.05 (U of 0, 1
    or 2 either way: p = 2, 4 and 8 / 252), and the six orders together on far more than 12."""
    rng = random.Random(11)
    metrics = ["iops", "bandwidth", "p50", "p99", "max", "slow_fsyncs"]
    orders = [rng.sample(range(10), 10) for _ in metrics]
    values = [[float(2 ** order[run]) for run in range(10)] for order in orders]

    def splits_with_a_call() -> int:
        called = 0
        for chosen in itertools.combinations(range(10), 5):
            rest = [run for run in range(10) if run not in chosen]
            tests = [
                _test(metric, [vals[r] for r in chosen], [vals[r] for r in rest])
                for metric, vals in zip(metrics, values, strict=True)
            ]
            called += any(t.verdict in (vd.REGRESSION, vd.IMPROVEMENT)
                          for t in vd.decide(tests, vd.Settings()))  # fmt: skip
        return called

    # With Holm only complete separations (6 x 2/252 = 0.048) call: two splits per metric,
    # twelve different ones for these orders, the most alpha allows.
    assert splits_with_a_call() == math.floor(0.05 * 252) == 12
    monkeypatch.setattr(sig, "holm", lambda p_values: list(p_values))
    uncorrected = splits_with_a_call()
    assert 12 < uncorrected <= 6 * 8, uncorrected


def test_a_job_repeated_in_one_output_is_one_run() -> None:
    """Two stonewalled repeats in one file are one run (their median), not two; the same
    file's other node and another file stay runs of their own."""
    found = {("a.json", "n1"): [1.0, 3.0], ("a.json", "n2"): [5.0], ("b.json", "n1"): [7.0]}
    runs = [(source, node, value) for (source, node), vals in found.items() for value in vals]
    entries = [
        cast(Entry, SimpleNamespace(source=source, node=node, seq=seq))
        for seq, (source, node, _) in enumerate(runs)
    ]
    metric = dataclasses.replace(_METRIC["iops"], value=lambda entry, op: runs[entry.seq][2])
    sample = vd.samples(entries, "write", metric)
    assert sample.values == [2.0, 5.0, 7.0]
    assert sample.sources == ["a.json", "a.json", "b.json"]
