"""One fio output as Prometheus text: what `fioprobe convert` prints.

No Pushgateway and no earlier runs: the counters hold this run alone, which is what
node_exporter's textfile collector expects of a file it reads. The exporter benchmark
(bench/exporter_bench.py) times this very function.

Counts are floats in the exposition: from `fioprobe.metrics.totals.COUNT_LIMIT` (2**53) on,
consecutive counts are no longer distinct, so a file whose samples or bytes reach it is refused
(one line, exit 3, nothing written), as the state file and the push refuse totals that reach it.
"""

from __future__ import annotations

import time

from fioprobe.errors import ExitCode, FioprobeError
from fioprobe.fio.model import Run
from fioprobe.fio.parse import parse_text
from fioprobe.metrics.collector import ProbeCollector, ProbeOutcome
from fioprobe.metrics.exposition import text_exposition
from fioprobe.metrics.totals import COUNT_LIMIT_SHOWN, GroupTotals, merge_run


class BeyondExactCounts(FioprobeError):
    """Totals of an input reach COUNT_LIMIT: exported, they would no longer be exact. Refused
    before anything is written (exit 3, like every input that cannot be exported as it is)."""

    exit_code = ExitCode.BAD_INPUT


def refuse_inexact(totals: GroupTotals, source: str, refused: str) -> None:
    """Raise `BeyondExactCounts` when a count of `totals` reached COUNT_LIMIT (the state's
    own check, `GroupTotals.beyond_limit`); `refused` says what was not done."""
    problem = totals.beyond_limit()
    if problem is not None:
        raise BeyondExactCounts(
            f"{source}: {problem}, at or above {COUNT_LIMIT_SHOWN}, the limit of exact "
            f"counting: {refused}, nothing written"
        )


def file_outcome(run: Run) -> ProbeOutcome:
    """The outcome of a run read from a file (`convert`, `push`): it failed if a job did.

    fio's longest job runtime stands in for the probe's wall time, which a file lacks.
    """
    elapsed = max((job.runtime_s for job in run.jobs), default=0.0)
    return ProbeOutcome(run=run, success=not run.failed_jobs, duration_seconds=elapsed)


def convert_text(text: str, source: str, labels: dict[str, str] | None = None) -> bytes:
    """The text exposition of one fio output; `labels` go on every series.

    Raises `FioOutputError` for output that is not a trustworthy fio result, and
    `BeyondExactCounts` for one whose counts could not be exported exactly.
    """
    run = parse_text(text, source=source)
    outcome = file_outcome(run)
    totals = GroupTotals()
    merge_run(totals, run, success=outcome.success, finished_at=run.timestamp or time.time())
    refuse_inexact(totals, source, "not converted")
    return text_exposition(ProbeCollector(outcome, totals, labels))
