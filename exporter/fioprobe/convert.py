"""One fio output as Prometheus text: what `fioprobe convert` prints.

No Pushgateway and no earlier runs: the counters hold this run alone, which is what
node_exporter's textfile collector expects of a file it reads. The exporter benchmark
(bench/exporter_bench.py) times this very function.
"""

from __future__ import annotations

import time

from .collector import ProbeCollector, ProbeOutcome
from .exposition import text_exposition
from .fioparse import parse_text
from .model import Run
from .state import GroupTotals, merge_run


def file_outcome(run: Run) -> ProbeOutcome:
    """The outcome of a run read from a file (`convert`, `push`): it failed if a job did.

    fio's longest job runtime stands in for the probe's wall time, which a file lacks.
    """
    elapsed = max((job.runtime_s for job in run.jobs), default=0.0)
    return ProbeOutcome(run=run, success=not run.failed_jobs, duration_seconds=elapsed)


def convert_text(text: str, source: str, labels: dict[str, str] | None = None) -> bytes:
    """The text exposition of one fio output; `labels` go on every series.

    Raises `FioOutputError` for output that is not a trustworthy fio result.
    """
    run = parse_text(text, source=source)
    outcome = file_outcome(run)
    totals = GroupTotals()
    merge_run(totals, run, success=outcome.success, finished_at=run.timestamp or time.time())
    return text_exposition(ProbeCollector(outcome, totals, labels))
