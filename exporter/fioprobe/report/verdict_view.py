"""The verdict and the spread of repeated runs as the reader sees them: document sections,
report.json fields and the lines the command prints.

Kept apart from `verdict` (the statistics) so that the numbers are decided once and every
output (HTML, Markdown, JSON, the terminal) shows the same decision.
"""

from __future__ import annotations

from collections.abc import Sequence

from fioprobe.report import significance as sig
from fioprobe.report.document import Bullets, Cell, Paragraph, Section, Table
from fioprobe.report.format import fmt_count, fmt_ms
from fioprobe.report.verdict import (
    CORRECTION_NAME,
    IMPROVEMENT,
    METRICS,
    NO_CHANGE,
    REGRESSION,
    TEST_NAME,
    TOO_FEW,
    CandidateVerdict,
    Metric,
    MetricTest,
    Sample,
    Settings,
    effect_text,
    minimum_text,
    runs_needed,
)

_LEVEL = {REGRESSION: 2, TOO_FEW: 1}
#: The command prints at most this many job lines per candidate and regression lines in all:
#: a terminal is read, the report holds every test (20 groups of 30 jobs would be 600 lines).
COMMAND_ROWS = 5
COMMAND_REGRESSIONS = 10
_BY_KEY = {metric.key: metric for metric in METRICS}


def _number(metric: Metric, value: float) -> tuple[str, str]:
    """(number, unit) of a metric's value: ms, per second, MiB/s or a count per run."""
    if metric.unit == "seconds":
        return fmt_ms(value), " ms"
    if metric.unit == "bytes per second":
        return fmt_count(value / 2**20), " MiB/s"
    if metric.unit == "count":
        return f"{value:.3g}", ""
    return fmt_count(value), ""


def fmt_value(metric: Metric, value: float) -> str:
    return "".join(_number(metric, value))


def fmt_spread(metric: Metric, spread: sig.Spread) -> str:
    mean, unit = _number(metric, spread.mean)
    return f"{mean} ± {_number(metric, spread.stddev)[0]}{unit} (n={spread.n})"


def _sample_cell(metric: Metric, sample: Sample) -> Cell:
    hover = "; ".join(sorted(set(sample.sources)))[:500]
    return Cell(fmt_spread(metric, sample.spread), sample.spread.mean, 0, hover)


def verdict_section(verdicts: Sequence[CandidateVerdict], baseline: str) -> Section:
    """Per candidate, one row per job and metric: both groups' runs, the test, the verdict."""
    settings = verdicts[0].settings if verdicts else Settings()
    intro = (
        f"Repeated runs of a job in the baseline and in a candidate group, compared metric by "
        f"metric with the {TEST_NAME} test; the p-values of one candidate are corrected "
        f"together ({CORRECTION_NAME}, family-wise alpha {settings.alpha:g}), and fewer than "
        f"{settings.min_runs} runs per group get no test. A regression or improvement is "
        "called only beyond the runs' noise and when the Hodges-Lehmann effect (the median "
        "over all pairs of runs: a ratio, or a shift per run for counts) reaches the metric's "
        f"minimum ({_minimums()}). Cells show mean ± standard deviation over the runs. "
        '"No significant change" means these runs cannot tell the groups apart at that size '
        "of effect, not that they are equal."
    )
    section = Section(f"Verdict against the baseline {baseline}", [Paragraph(intro)])
    if not verdicts:
        section.blocks.append(Paragraph("No job ran both in the baseline and another group."))
        return section
    section.blocks.append(Bullets(summary_lines(verdicts)))
    for verdict in verdicts:
        section.blocks.append(_verdict_table(verdict))
    return section


def _minimums() -> str:
    """The minimum effect of every metric, from METRICS (never restated by hand)."""
    texts = []
    for metric in METRICS:
        if metric.unit == "count":
            texts.append(
                f"{metric.title}: {metric.min_shift:g} per run or "
                f"{metric.min_effect:.0%} of the baseline's median, whichever is more"
            )
        else:
            texts.append(f"{metric.title}: ×{1 + metric.min_effect:g} either way")
    return "; ".join(texts)


def _verdict_table(verdict: CandidateVerdict) -> Table:
    rows = []
    for test in verdict.tests:
        p = test.test.p if test.test else None
        rows.append(
            (
                f"{test.row} ({test.op}): {test.metric.title}",
                [
                    _sample_cell(test.metric, test.baseline),
                    _sample_cell(test.metric, test.candidate),
                    Cell(effect_text(test) if test.effect is not None else "–", test.effect),
                    Cell("–" if p is None else f"{p:.3g}", p),
                    Cell(
                        "–" if test.p_corrected is None else f"{test.p_corrected:.3g}",
                        test.p_corrected,
                    ),
                    Cell(test.verdict, None, _LEVEL.get(test.verdict, 0), test.reason),
                    Cell(test.reason),
                ],
            )
        )
    family = len(verdict.family)
    note = (
        f"{family} tests in this family (one per job and metric that varied and had at least "
        f"{verdict.settings.min_runs} runs per group); the smallest p reachable with n and m "
        f"runs is 2 / C(n+m, n), so {family} tests need at least "
        f"{runs_needed(max(family, 1), verdict.settings.alpha)} runs per group. "
        f"p: {TEST_NAME}; effect: Hodges-Lehmann, candidate against baseline."
    )
    return Table(
        f"verdict-{verdict.candidate}",
        f"{verdict.candidate} against {verdict.baseline}",
        [
            "job (operation): metric",
            f"{verdict.baseline} (baseline)",
            verdict.candidate,
            "effect",
            "p",
            f"p ({CORRECTION_NAME})",
            "verdict",
            "why",
        ],
        rows,
        note,
    )


def summary_lines(verdicts: Sequence[CandidateVerdict]) -> list[str]:
    """One line per candidate: what regressed, what improved, what had too few runs."""
    lines = []
    for verdict in verdicts:
        head = f"{verdict.candidate} against {verdict.baseline}"
        parts = []
        for label, found in (
            ("regression", verdict.regressions),
            ("improvement", verdict.improvements),
        ):
            if found:
                parts.append(f"{label} in {_list(found)}")
        if verdict.too_few:
            parts.append(f"too few runs for {_list(verdict.too_few, effects=False)}")
        if not parts:
            parts.append(f"no significant change in {len(verdict.tests)} comparisons")
        lines.append(f"{head}: " + "; ".join(parts))
    return lines


def _list(tests: Sequence[MetricTest], effects: bool = True) -> str:
    by_row: dict[str, list[str]] = {}
    for test in tests:
        text = test.metric.key
        if effects and test.effect is not None:
            text += f" {effect_text(test)}"
        by_row.setdefault(test.row, []).append(text)
    return ", ".join(f"{row} ({', '.join(items)})" for row, items in by_row.items())


def spread_section(spreads: dict[str, dict[str, dict[str, sig.Spread]]]) -> Section:
    """Mean ± standard deviation per job and group, wherever a job ran more than once."""
    keys = [m.key for m in METRICS if any(m.key in g for r in spreads.values() for g in r.values())]
    rows = []
    for row, groups in spreads.items():
        for group, metrics in groups.items():
            cells = []
            for key in keys:
                spread = metrics.get(key)
                cells.append(
                    Cell("–")
                    if spread is None
                    else Cell(fmt_spread(_BY_KEY[key], spread), spread.mean)
                )
            rows.append((f"{row}, {group}", cells))
    intro = Paragraph(
        "Where a job ran several times in a group: mean ± sample standard deviation over its "
        "runs (the latency of the job's own operation, sync for fsync jobs), the spread a "
        "comparison has to see through."
    )
    table = Table("spread", "", ["job, group", *[_BY_KEY[k].title for k in keys]], rows)
    return Section("Spread over repeated runs", [intro, table])


def verdict_data(verdicts: Sequence[CandidateVerdict]) -> list[dict[str, object]]:
    """report.json's `verdicts`: every test with its samples, p-values, effect and reason."""
    return [
        {
            "baseline": v.baseline,
            "candidate": v.candidate,
            "test": TEST_NAME,
            "correction": CORRECTION_NAME,
            "alpha": v.settings.alpha,
            "min_runs": v.settings.min_runs,
            "family_size": len(v.family),
            "runs_needed": runs_needed(max(len(v.family), 1), v.settings.alpha),
            "results": [_test_data(t) for t in v.tests],
        }
        for v in verdicts
    ]


def _test_data(test: MetricTest) -> dict[str, object]:
    return {
        "job": test.row,
        "op": test.op,
        "metric": test.metric.key,
        "unit": test.metric.unit,
        "verdict": test.verdict,
        "reason": test.reason,
        "u": test.test.u if test.test else None,
        "exact": test.test.exact if test.test else None,
        "p": test.test.p if test.test else None,
        "p_corrected": test.p_corrected,
        "effect": test.effect,
        "effect_kind": test.effect_kind,
        "min_effect": minimum_text(test),
        "smallest_p": sig.smallest_p(len(test.baseline.values), len(test.candidate.values)),
        "baseline": _sample_data(test.baseline),
        "candidate": _sample_data(test.candidate),
    }


def _sample_data(sample: Sample) -> dict[str, object]:
    spread = sample.spread
    return {
        "n": spread.n,
        "mean": spread.mean,
        "stddev": spread.stddev,
        "median": sample.median,
        "values": sample.values,
        "sources": sample.sources,
    }


def spread_data(
    spreads: dict[str, dict[str, dict[str, sig.Spread]]],
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    return {
        row: {
            group: {
                key: {"n": s.n, "mean": s.mean, "stddev": s.stddev} for key, s in metrics.items()
            }
            for group, metrics in groups.items()
        }
        for row, groups in spreads.items()
    }


def command_lines(verdicts: Sequence[CandidateVerdict]) -> list[str]:
    """What `fioprobe report` prints: the test, then per candidate and job the verdict of
    every metric, then each regression with its numbers."""
    if not verdicts:
        return []
    settings = verdicts[0].settings
    lines = [
        f"verdict against {verdicts[0].baseline} ({TEST_NAME}; {CORRECTION_NAME} over each "
        f"candidate's tests, alpha {settings.alpha:g}; at least {settings.min_runs} runs per "
        "group):"
    ]
    for verdict in verdicts:
        lines += _candidate_lines(verdict)
    regressions = [(verdict, test) for verdict in verdicts for test in verdict.regressions]
    for verdict, test in regressions[:COMMAND_REGRESSIONS]:
        lines.append(
            f"regression: {test.row} {test.metric.title} in {verdict.candidate}: "
            f"{fmt_value(test.metric, test.baseline.median)} -> "
            f"{fmt_value(test.metric, test.candidate.median)} (medians of "
            f"{len(test.baseline.values)} and {len(test.candidate.values)} runs), "
            f"{effect_text(test)}, p = {test.p_corrected:.3g} ({CORRECTION_NAME} over "
            f"{len(verdict.family)} tests)"
        )
    if len(regressions) > COMMAND_REGRESSIONS:
        lines.append(
            f"regression: {len(regressions) - COMMAND_REGRESSIONS} more, every one in the "
            "report's verdict section"
        )
    return lines


def _candidate_lines(verdict: CandidateVerdict) -> list[str]:
    """A line per job, or past `COMMAND_ROWS` jobs the first ones with something to say
    (a call, too few runs) and one line counting the rest, quiet jobs first to go."""
    by_row: dict[str, list[MetricTest]] = {}
    for test in verdict.tests:
        by_row.setdefault(test.row, []).append(test)
    head = f"  {verdict.candidate}: "
    if len(by_row) <= COMMAND_ROWS:
        return [f"{head}{row}: {_row_verdicts(tests)}" for row, tests in by_row.items()]
    notable = [row for row, tests in by_row.items() if any(t.verdict != NO_CHANGE for t in tests)]
    shown = notable[:COMMAND_ROWS]
    lines = [f"{head}{row}: {_row_verdicts(by_row[row])}" for row in shown]
    hidden = len(notable) - len(shown)
    quiet = len(by_row) - len(notable)
    kinds = [f"{hidden} with a call or too few runs"] if hidden else []
    kinds += [f"{quiet} with no significant change"] if quiet else []
    lines.append(
        f"{head}{hidden + quiet} more of {len(by_row)} jobs ({', '.join(kinds)}): "
        "see the report's verdict section"
    )
    return lines


def _row_verdicts(tests: Sequence[MetricTest]) -> str:
    """`regression (p50 ×11.3 p=0.048, ...); no significant change (slow_fsyncs)` for one job."""
    order = [REGRESSION, IMPROVEMENT, TOO_FEW, NO_CHANGE]
    parts = []
    for kind in order:
        found = [t for t in tests if t.verdict == kind]
        if not found:
            continue
        items = []
        for test in found:
            text = test.metric.key
            if kind in (REGRESSION, IMPROVEMENT) and test.p_corrected is not None:
                text += f" {effect_text(test)} p={test.p_corrected:.2g}"
            items.append(text)
        why = {t.reason for t in found}
        # "too few runs" says how many would do, once when every metric has the same reason
        suffix = f": {found[0].reason}" if kind == TOO_FEW and len(why) == 1 else ""
        parts.append(f"{kind} ({', '.join(items)}){suffix}")
    return "; ".join(parts)
