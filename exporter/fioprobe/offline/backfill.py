"""`fioprobe backfill`: archives of fio results into Prometheus TSDB blocks.

The results become what the live exporter would have pushed, one push per run, each at the
run's own time: per series key (storageclass = the report's group, profile = the report's job
row, node when known; `benchmark` for fio client/server output, see `series_labels`) the runs
are merged in time order into the same cumulative totals
(`fioprobe.metrics.totals.merge_run`) and rendered by the same collector
(`fioprobe.metrics.collector`), so
histograms are cumulative across runs with the contract's buckets, and last-run summaries
carry fio's exact percentiles. The samples are written as OpenMetrics with timestamps, and
`promtool tsdb create-blocks-from openmetrics` turns them into blocks ready to be copied into
a Prometheus data directory (whose retention must reach back to the oldest run).

Runs of one series at the same millisecond are one push (the totals hold both; the last-run
series show the later one), since a series cannot hold two values at one time.

Every run time must be one a fio run can have (`fioprobe.results.run_time`): Prometheus
counts retention from its newest block, so a single result stamped in 2100 would make it
delete every real block. One such result refuses the whole backfill before anything is
written; the span of what will be written is printed before promtool runs. So does a series
whose cumulative totals reach the limit of exact counting
(`fioprobe.metrics.totals.COUNT_LIMIT`), as they would refuse a live probe's state.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.samples import Sample

from fioprobe.errors import ExitCode, FailureReason, FioprobeError, UsageError
from fioprobe.fio.model import Run
from fioprobe.grouping import BENCHMARK, JOB, PROBE_LABELS, probe_key
from fioprobe.metrics.collector import ProbeOutcome, registry_for
from fioprobe.metrics.totals import GroupTotals, merge_run
from fioprobe.offline.convert import refuse_inexact
from fioprobe.results.discover import Unreadable
from fioprobe.results.load import Entry, Grouping, load_with_progress
from fioprobe.results.run_time import format_run_time, run_time_problem
from fioprobe.text import printable

#: Labels the exporter sets itself; --label may not override them.
RESERVED_LABELS = frozenset(
    {"job", *PROBE_LABELS, BENCHMARK, "le", "quantile", "fio_job", "reason",
     "fio_version", "version", "volume_type", "provisioner", "ran_on_node", "histogram_source",
     "__name__", "instance"}
)  # fmt: skip
#: The `benchmark` of client/server output whose folder gives no battery.
UNNAMED_BENCHMARK = "fio-client"
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
OPENMETRICS_NAME = "fioprobe-backfill.om"


class BackfillError(FioprobeError):
    """promtool missing or failing: the inputs were fine, the blocks were not written."""

    exit_code = ExitCode.PROBE_FAILED


class OutputNotEmpty(UsageError):
    """The output folder already holds blocks: refused before anything is written."""


class RunTimeOutOfRange(FioprobeError):
    """A result's run time is before fio existed or after now: refused before anything is
    written (exit 3, like every input that cannot be trusted)."""

    exit_code = ExitCode.BAD_INPUT


@dataclass(frozen=True, slots=True)
class Push:
    """One push the live exporter would have made: a series key at one time."""

    labels: dict[str, str]
    timestamp: float
    entries: list[Entry]
    totals: GroupTotals


@dataclass(slots=True)
class BackfillResult:
    openmetrics: Path
    blocks: list[Path]
    pushes: int
    series_keys: int
    samples: int
    files_read: int
    files_parsed: int
    unreadable: list[Unreadable] = field(default_factory=list)
    first_timestamp: float | None = None
    last_timestamp: float | None = None


def parse_labels(pairs: Iterable[str]) -> dict[str, str]:
    """`NAME=VALUE` strings (from --label) into a dict, refusing reserved or invalid names."""
    labels: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _LABEL_NAME.match(name) or name.startswith("__"):
            raise UsageError(f"--label wants NAME=VALUE with a Prometheus label name: {pair!r}")
        if name in RESERVED_LABELS:
            raise UsageError(f"--label {name} is set by fioprobe itself")
        labels[name] = value
    return labels


def series_labels(entry: Entry, extra: dict[str, str]) -> dict[str, str]:
    """The Pushgateway grouping key the live exporter would have used, plus extra labels.

    A result of fio's client (client/server output: every job names its server's
    `hostname`, fio's "All clients" aggregate too) is a benchmark's, never a probe's: its
    series carry `benchmark=<the folder's battery>` (`fioprobe distributed` names its
    archive's folders `<benchmark>_<storageclass>-fio-<server>`), or `benchmark=fio-client`
    when the folder pattern gives no battery. The mixin's probe rules and panels select
    `benchmark=""`, so they never take a benchmark's servers for probes, while its figures
    stay queryable under the benchmark's name.
    """
    labels = {"job": JOB, **probe_key(entry.group, entry.row, entry.node), **extra}
    if entry.job.hostname is not None:
        labels[BENCHMARK] = entry.battery or UNNAMED_BENCHMARK
    return labels


def plan(entries: Sequence[Entry], extra: dict[str, str] | None = None) -> list[Push]:
    """Every push, per series key in time order, with the totals after it.

    Raises `BeyondExactCounts`, naming the file that took a series' totals to COUNT_LIMIT.
    """
    extra = extra or {}
    by_key: dict[tuple[tuple[str, str], ...], list[Entry]] = defaultdict(list)
    for entry in entries:
        by_key[tuple(sorted(series_labels(entry, extra).items()))].append(entry)
    pushes: list[Push] = []
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda e: (e.timestamp, e.seq))
        totals = GroupTotals()
        index = 0
        while index < len(members):
            millis = round(members[index].timestamp * 1000)
            same = [m for m in members[index:] if round(m.timestamp * 1000) == millis]
            index += len(same)
            for entry in same:
                merge_run(
                    totals,
                    _single_job_run(entry),
                    success=entry.job.error == 0,
                    finished_at=millis / 1000,
                )
                refuse_inexact(
                    totals,
                    f"{entry.source}, with the runs before it in its series",
                    "backfill refused",
                )
            pushes.append(Push(dict(key), millis / 1000, same, _copy(totals)))
    return pushes


def _single_job_run(entry: Entry) -> Run:
    """The run as the live exporter would have seen it for this series: only this job."""
    run = entry.run
    return Run(run.source, run.fio_version, run.timestamp, [entry.job], run.options)


def _copy(totals: GroupTotals) -> GroupTotals:
    return GroupTotals.from_json(totals.to_json())


def openmetrics_text(pushes: Sequence[Push]) -> tuple[bytes, int]:
    """All pushes as one OpenMetrics document (families contiguous, each series in time
    order), and its number of samples."""
    families: dict[str, Metric] = {}
    count = 0
    for push in pushes:
        last = push.entries[-1]
        success = last.job.error == 0
        outcome = ProbeOutcome(
            run=_single_job_run(last),
            success=success,
            duration_seconds=last.job.runtime_s,
            failure_reason=None if success else FailureReason.FIO_ERROR,
        )
        registry = registry_for(outcome, push.totals, push.labels)
        for family in registry.collect():
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            for sample in family.samples:
                merged.samples.append(
                    Sample(sample.name, sample.labels, sample.value, push.timestamp)
                )
                count += 1

    class _All:
        def collect(self) -> Iterable[Metric]:
            return families.values()

    return (generate_latest(_All()) if count else b"# EOF\n"), count


def print_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_run_times(entries: Sequence[Entry], now: float | None = None) -> None:
    """Refuse the backfill when any run time cannot be a real run's: one line naming the
    first such file, its time and where the time came from, and how many more there are."""
    now = time.time() if now is None else now
    bad: dict[str, tuple[Entry, str]] = {}
    for entry in entries:
        problem = run_time_problem(entry.timestamp, now)
        if problem is not None and entry.source not in bad:
            bad[entry.source] = (entry, problem)
    if not bad:
        return
    entry, problem = next(iter(bad.values()))
    more = f" ({len(bad) - 1} more files likewise)" if len(bad) > 1 else ""
    raise RunTimeOutOfRange(
        f"{printable(str(entry.source), 300)}: run time {format_run_time(entry.timestamp)} (from "
        f"{entry.timestamp_origin}) {problem}, no fio run's time: backfill refused, "
        f"nothing written{more}"
    )


def time_span(pushes: Sequence[Push]) -> str:
    """The span the blocks will cover, for the line printed before promtool runs."""
    if not pushes:
        return "nothing to backfill"
    first = min(p.timestamp for p in pushes)
    last = max(p.timestamp for p in pushes)
    return (
        f"backfilling {len(pushes)} push{'es' if len(pushes) != 1 else ''} from "
        f"{format_run_time(first)} to "
        f"{format_run_time(last)}: the Prometheus retention must reach back to the first"
    )


def create_blocks(openmetrics: Path, outdir: Path, promtool: str = "promtool") -> list[Path]:
    """Run promtool; returns the block folders it made in `outdir`."""
    binary = shutil.which(promtool)
    if binary is None:
        raise BackfillError(
            f"{promtool} is not installed (Debian package prometheus; run make setup)"
        )
    before = {p.name for p in outdir.iterdir()}
    proc = subprocess.run(
        [binary, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(openmetrics),
         str(outdir)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise BackfillError(
            f"promtool tsdb create-blocks-from openmetrics failed ({proc.returncode}): "
            + (" | ".join(message[-3:]) or "no output")
        )
    return sorted(
        p
        for p in outdir.iterdir()
        if p.is_dir() and p.name not in before and (p / "meta.json").exists()
    )


def backfill(
    paths: Sequence[str],
    outdir: str | os.PathLike[str],
    grouping: Grouping | None = None,
    extra_labels: dict[str, str] | None = None,
    *,
    promtool: str = "promtool",
    progress_stream: TextIO | None = None,
    announce: Callable[[str], None] | None = print_to_stderr,
) -> BackfillResult:
    """Read `paths`, write OUTDIR/fioprobe-backfill.om and the TSDB blocks into OUTDIR.

    The span of the run times goes to `announce` (stderr by default; None for none) before
    promtool runs: the blocks are only usable where the retention reaches back that far.
    """
    out = Path(outdir)
    _refuse_existing_blocks(out)
    loaded = load_with_progress(paths, grouping, progress_stream, "backfill")
    check_run_times(loaded.entries)
    pushes = plan(loaded.entries, extra_labels)
    text, samples = openmetrics_text(pushes)
    out.mkdir(parents=True, exist_ok=True)
    _refuse_existing_blocks(out)
    om_path = out / OPENMETRICS_NAME
    om_path.write_bytes(text)
    if samples and announce is not None:
        announce(time_span(pushes))
    blocks = create_blocks(om_path, out, promtool) if samples else []
    stamps = [p.timestamp for p in pushes]
    return BackfillResult(
        openmetrics=om_path,
        blocks=blocks,
        pushes=len(pushes),
        series_keys=len({tuple(sorted(p.labels.items())) for p in pushes}),
        samples=samples,
        files_read=loaded.files_read,
        files_parsed=loaded.files_parsed,
        unreadable=loaded.unreadable,
        first_timestamp=min(stamps, default=None),
        last_timestamp=max(stamps, default=None),
    )


def _refuse_existing_blocks(out: Path) -> None:
    """A second backfill into the same folder would hand Prometheus two overlapping copies
    of the same history."""
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder; backfill into an empty folder")
    existing = [p.name for p in out.iterdir() if (p / "meta.json").exists()]
    if existing:
        raise OutputNotEmpty(
            f"{out} already holds TSDB blocks ({', '.join(sorted(existing)[:3])}...); "
            "backfill into an empty folder"
        )
