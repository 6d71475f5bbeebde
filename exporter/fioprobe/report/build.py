"""Write a report: read the results, then report.md, report.html, report.json and charts/.

The numbers are computed once (`content`), then rendered as a document (`sections`, written
as Markdown and HTML by `document`) and as report.json (`report_json`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fioprobe.errors import UsageError
from fioprobe.report import analysis as an
from fioprobe.report import sections
from fioprobe.report.content import collect
from fioprobe.report.document import to_html, to_markdown
from fioprobe.report.options import ReportOptions
from fioprobe.report.report_json import report_data
from fioprobe.report.verdict_view import command_lines
from fioprobe.results.discover import Unreadable
from fioprobe.results.load import Loaded, load_with_progress

__all__ = ["BaselineError", "ReportOptions", "ReportResult", "build_report"]

_CHART_NAME = re.compile(r"^\d{2,}-[a-z0-9-]+\.png$")


@dataclass(slots=True)
class ReportResult:
    outdir: Path
    markdown: Path
    html: Path
    data: Path
    charts: list[Path]
    files_read: int
    files_parsed: int
    unreadable: list[Unreadable]
    groups: list[str]
    #: The verdict against the baseline as the command prints it (empty without one).
    verdict_lines: list[str] = field(default_factory=list)


class BaselineError(UsageError):
    """--baseline names no group of the input (exit 2: the option is wrong, not the data)."""


def build_report(
    paths: Sequence[str],
    outdir: str | os.PathLike[str],
    options: ReportOptions | None = None,
    *,
    progress_stream: TextIO | None = None,
    loaded: Loaded | None = None,
) -> ReportResult:
    """Read everything under `paths` and write the report into `outdir`."""
    options = options or ReportOptions()
    if loaded is None:
        loaded = load_with_progress(paths, options.grouping, progress_stream, "reading")
    groups = an.ordered_groups(loaded.entries, options.baseline)
    if options.baseline is not None and options.baseline not in groups:
        raise BaselineError(
            f"--baseline {options.baseline!r} is not a group of the input; groups: "
            + (", ".join(groups) or "(none)")
        )
    out = Path(outdir)
    (out / "charts").mkdir(parents=True, exist_ok=True)
    for stale in (out / "charts").glob("*.png"):
        if _CHART_NAME.match(stale.name):  # an earlier report's chart, not the user's file
            stale.unlink()
    content = collect(loaded, options, groups, list(paths))
    document, images = sections.render(content)
    written = []
    for image in images:
        target = out / image.path
        target.write_bytes(image.png)
        written.append(target)
    markdown = out / "report.md"
    markdown.write_text(to_markdown(document), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(to_html(document), encoding="utf-8")
    data = report_data(content, [image.path for image in images])
    data_path = out / "report.json"
    data_path.write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
    return ReportResult(
        out,
        markdown,
        html_path,
        data_path,
        written,
        loaded.files_read,
        loaded.files_parsed,
        loaded.unreadable,
        groups,
        command_lines(content.verdicts),
    )
