"""Parse discovered sources with the exporter's own reader and label every job of every run.

One `Entry` is one job of one fio run, with everything the report and the backfill need to
place it: its column group, its row, its node, its timestamp, the options it ran with. The
numbers themselves stay in the exporter's model (`fioprobe.fio.model.Job`), read by
`fioprobe.fio.parse` exactly as `fioprobe convert`/`push` read them.

Grouping (`Grouping`):
- `folder` (default): a folder naming pattern (by default `<battery>_<group>-fio-<node>`, as
  benchmark batteries name their per-cluster, per-host folders) is matched against every
  folder of a result's path, the deepest match winning; without a match the result's own
  folder is its group. Rows are fio job names.
- `job`: one column per fio job name; rows are the folder groups.
- `option:NAME`: one column per value of the fio option NAME (e.g. `option:iodepth`).
A row name gets the options that tell its runs apart (e.g. `randread [iodepth=4]`) when the
same job name ran with different iodepth, numjobs, bs, rw, ioengine or direct settings.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TextIO

from fioprobe.errors import UsageError
from fioprobe.fio import parse as fioparse
from fioprobe.fio.model import Job, Run
from fioprobe.fio.parse import FioOutputError
from fioprobe.results.discover import Source, Unreadable, count_candidates, discover
from fioprobe.results.progress import Progress

#: `<battery>_<group>-fio-<node>`, e.g. `etcdbench_gp3-single-fio-master-0`.
DEFAULT_FOLDER_PATTERN = r"^(?P<battery>[^_/]+)_(?P<group>.+)-fio-(?P<node>[^/]+)$"
#: Options that make two runs of one job name different experiments.
DISTINGUISHING_OPTIONS = ("rw", "bs", "iodepth", "numjobs", "ioengine", "direct")
#: Options whose values form a sweep (response curves).
SWEEP_OPTIONS = ("iodepth", "numjobs")
#: fio's defaults for the options above, so that "iodepth not given" equals "iodepth=1".
FIO_DEFAULTS = {"iodepth": "1", "numjobs": "1", "direct": "0"}
#: Files that are not fio output are listed one by one up to this many, then counted: an
#: archive of a hundred thousand empty `.json` members must not become a report of a
#: hundred thousand lines; the first thousand show what went wrong.
MAX_LISTED_NOT_FIO = 1000


class GroupingError(UsageError):
    """A --group-by or --folder-pattern that cannot be used (exit 2, like every bad option)."""


@dataclass(frozen=True, slots=True)
class Grouping:
    by: str = "folder"
    folder_pattern: str = DEFAULT_FOLDER_PATTERN

    def compiled(self) -> re.Pattern[str]:
        try:
            pattern = re.compile(self.folder_pattern)
        except re.error as exc:
            raise GroupingError(f"--folder-pattern is not a regular expression: {exc}") from None
        names = set(pattern.groupindex)
        if not names & {"group", "cluster"}:
            raise GroupingError("--folder-pattern needs a named group (?P<group>...)")
        return pattern

    def validate(self) -> None:
        self.compiled()
        if self.by not in ("folder", "job") and not (
            self.by.startswith("option:") and len(self.by) > len("option:")
        ):
            raise GroupingError(f"--group-by must be folder, job or option:NAME, not {self.by!r}")


@dataclass(frozen=True, slots=True)
class Entry:
    """One job of one fio run, placed in the report."""

    source: str
    run: Run
    job: Job
    #: Position of the job in fio's output (fio runs stonewalled jobs in this order).
    index: int
    #: Column of the tables (by default the folder group, e.g. the cluster or disk layout).
    group: str
    #: Row of the tables: the job name, plus distinguishing options where needed.
    row: str
    #: `row` without numjobs' `.N` suffix: consecutive jobs of one family form a timeline.
    family: str
    node: str | None
    battery: str | None
    #: The group the folder naming rule gives, whatever --group-by says.
    folder_group: str
    #: Effective fio options of this job (global options overridden by the job's own).
    options: dict[str, str]
    #: Unix time of the run (fio's timestamp_ms/timestamp; the file's mtime without one).
    timestamp: float
    timestamp_origin: str
    #: Discovery order, for stable sorting.
    seq: int


@dataclass(slots=True)
class Loaded:
    entries: list[Entry]
    unreadable: list[Unreadable]
    files_read: int
    files_parsed: int


def load(
    paths: Iterable[str],
    grouping: Grouping | None = None,
    progress: Callable[[str], None] | None = None,
) -> Loaded:
    """Discover, parse and place every result under `paths`. Never raises for bad inputs."""
    grouping = grouping or Grouping()
    grouping.validate()
    pattern = grouping.compiled()
    raw: list[Entry] = []
    unreadable: list[Unreadable] = []
    files_read = files_parsed = not_fio = 0
    for item in discover(list(paths)):
        if progress is not None:
            progress(item.name)
        if isinstance(item, Unreadable):
            unreadable.append(item)
            continue
        files_read += 1
        try:
            placed = _entries_of(item, pattern, len(raw))
        except FioOutputError as exc:
            not_fio += 1
            if not_fio <= MAX_LISTED_NOT_FIO:
                unreadable.append(Unreadable(item.name, exc.problem))
            continue
        files_parsed += 1
        raw.extend(placed)
    if not_fio > MAX_LISTED_NOT_FIO:
        more = not_fio - MAX_LISTED_NOT_FIO
        unreadable.append(
            Unreadable(
                f"({more} more)",
                f"{more} more files that are not fio output, not listed: "
                f"{not_fio} in all, the first {MAX_LISTED_NOT_FIO} are above",
            )
        )
    return Loaded(_assign_rows(raw, grouping), unreadable, files_read, files_parsed)


def load_with_progress(
    paths: Iterable[str], grouping: Grouping | None, stream: TextIO | None, label: str
) -> Loaded:
    """`load` with a progress bar on `stream` (stderr by default) when it is a terminal."""
    paths = list(paths)
    bar = Progress(count_candidates(paths), label, stream)
    try:
        return load(paths, grouping, progress=bar.step)
    finally:
        bar.close()


def parse_source(source: Source) -> tuple[Run, dict[str, Any], list[dict[str, Any]]]:
    """The run as the exporter reads it, plus fio's document and the job objects behind
    `run.jobs` (same order), for the fields the model does not keep (options, timestamp_ms).

    The document is found and mapped by fioparse itself, once: the same tolerant reader and
    the same unit conversions as `fioprobe convert` and `fioprobe push`.
    """
    text = source.data.decode("utf-8", errors="replace")
    return fioparse.parse_text_with_raw(text, source.name)


def _entries_of(source: Source, pattern: re.Pattern[str], seq0: int) -> list[Entry]:
    run, document, job_objects = parse_source(source)
    folder_group, node, battery = _folder_labels(source, pattern)
    global_options = document.get("global options")
    global_options = global_options if isinstance(global_options, dict) else {}
    timestamp, origin = _timestamp(document, run, source)
    entries = []
    for index, (job, obj) in enumerate(zip(run.jobs, job_objects, strict=True)):
        job_options = obj.get("job options")
        options = {str(k): str(v) for k, v in global_options.items()}
        if isinstance(job_options, dict):
            options.update({str(k): str(v) for k, v in job_options.items()})
        for key, value in FIO_DEFAULTS.items():
            options.setdefault(key, value)
        entries.append(
            Entry(
                source=source.name,
                run=run,
                job=job,
                index=index,
                group=folder_group,
                row=job.name,
                family=job.fio_name,
                node=node or job.hostname,
                battery=battery,
                folder_group=folder_group,
                options=options,
                timestamp=timestamp,
                timestamp_origin=origin,
                seq=seq0 + index,
            )
        )
    return entries


def _folder_labels(source: Source, pattern: re.Pattern[str]) -> tuple[str, str | None, str | None]:
    """(group, node, battery) from the deepest path component the pattern matches."""
    folders = list(source.parts[:-1])
    stem = source.parts[-1].rsplit(".", 1)[0] if source.parts else ""
    for component in reversed([*folders, stem]):
        match = pattern.search(component)
        if match is None:
            continue
        found = {k: v for k, v in match.groupdict().items() if v}
        group = found.get("group") or found.get("cluster")
        if group:
            return group, found.get("node") or found.get("host"), found.get("battery")
    return (folders[-1] if folders else "results"), None, None


def _timestamp(document: dict[str, Any], run: Run, source: Source) -> tuple[float, str]:
    millis = document.get("timestamp_ms")
    if isinstance(millis, int | float) and not isinstance(millis, bool) and 0 < millis < 2**53:
        return float(millis) / 1000, "fio"
    if run.timestamp:
        return run.timestamp, "fio"
    return source.mtime, "file mtime"


def _assign_rows(entries: list[Entry], grouping: Grouping) -> list[Entry]:
    """Set group/row/family per --group-by, naming distinguishing options where they vary."""
    option = grouping.by[len("option:") :] if grouping.by.startswith("option:") else None
    folder_groups = {e.folder_group for e in entries}

    def base(entry: Entry) -> tuple[str, str]:
        """(row base, family base) before options are appended."""
        if grouping.by == "job":
            return entry.folder_group, entry.folder_group
        if option is not None and len(folder_groups) > 1:
            return f"{entry.folder_group}: {entry.job.name}", (
                f"{entry.folder_group}: {entry.job.fio_name}"
            )
        return entry.job.name, entry.job.fio_name

    values: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for entry in entries:
        family = base(entry)[1]
        for key in DISTINGUISHING_OPTIONS:
            if key != option:
                values[family][key].add(entry.options.get(key, ""))
    placed = []
    for entry in entries:
        row, family = base(entry)
        suffix = ", ".join(
            f"{key}={entry.options[key]}"
            for key in DISTINGUISHING_OPTIONS
            if len(values[family].get(key, ())) > 1
            and entry.options.get(key)
            and (key in SWEEP_OPTIONS or entry.options[key] != FIO_DEFAULTS.get(key))
        )
        if suffix:
            row, family = f"{row} [{suffix}]", f"{family} [{suffix}]"
        if grouping.by == "job":
            group = entry.job.fio_name
        elif option is not None:
            group = f"{option}={entry.options.get(option, '-')}"
        else:
            group = entry.folder_group
        placed.append(replace(entry, group=group, row=row, family=family))
    return placed
