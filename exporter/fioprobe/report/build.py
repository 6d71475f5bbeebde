"""Assemble the report: sections, tables and charts, written as Markdown, HTML and JSON."""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import UsageError
from ..histogram import cumulative
from ..metrics import EXPORTED_OPS
from ..state import op_histogram
from ..thresholds import ETCD_FSYNC_P99_SECONDS, LATENCY_YELLOW_SECONDS
from . import analysis as an
from . import charts
from .discover import Unreadable
from .document import (
    Bullets,
    Cell,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
    to_html,
    to_markdown,
)
from .load import Entry, Grouping, Loaded, load_with_progress

#: At most this many charts of one kind (tables always hold everything).
MAX_CHARTS_PER_KIND = 12
#: Timelines without a step are drawn up to this many (those with a step up to the above).
MAX_FLAT_TIMELINE_CHARTS = 4
#: Up to this many sources get a row in the "Sources" table (all are in report.json).
MAX_SOURCE_ROWS = 300
JSON_VERSION = 1
_CHART_NAME = re.compile(r"^\d{2,}-[a-z0-9-]+\.png$")

_METRIC_TITLES = {
    "p99": "p99",
    "p99.9": "p99.9",
    "mean": "mean",
    "max": "max",
    "stddev": "standard deviation",
}


@dataclass(slots=True)
class ReportOptions:
    grouping: Grouping = field(default_factory=Grouping)
    baseline: str | None = None
    warn_ms: float = LATENCY_YELLOW_SECONDS * 1e3
    crit_ms: float = ETCD_FSYNC_P99_SECONDS * 1e3
    title: str = "fio results"
    step_ratio: float = 2.0


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


class BaselineError(UsageError):
    """--baseline names no group of the input (exit 2: the option is wrong, not the data)."""


def build_report(
    paths: Sequence[str],
    outdir: str | os.PathLike[str],
    options: ReportOptions | None = None,
    *,
    progress_stream=None,
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
    builder = _Builder(loaded, options, groups, list(paths))
    document = builder.document()
    written = []
    for image in builder.images:
        target = out / image.path
        target.write_bytes(image.png)
        written.append(target)
    markdown = out / "report.md"
    markdown.write_text(to_markdown(document), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(to_html(document), encoding="utf-8")
    data_path = out / "report.json"
    data_path.write_text(json.dumps(builder.data(), indent=1, allow_nan=False), encoding="utf-8")
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
    )


# --- formatting ---------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    """Milliseconds with 4 significant digits, never in exponent notation."""
    ms = seconds * 1e3
    if ms == 0:
        return "0"
    if abs(ms) >= 10000:
        return f"{ms:.0f}"
    if abs(ms) < 0.001:
        return f"{ms:.6f}".rstrip("0")
    return f"{ms:#.4g}".rstrip(".") if "e" not in f"{ms:.4g}" else f"{ms:.6f}"


def fmt_count(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def fmt_ratio(value: float) -> str:
    return f"×{value:.3f}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "x"


# --- the builder --------------------------------------------------------------------------


class _Builder:
    def __init__(
        self, loaded: Loaded, options: ReportOptions, groups: list[str], paths: list[str]
    ) -> None:
        self.loaded = loaded
        self.entries = loaded.entries
        self.options = options
        self.groups = groups
        self.paths = paths
        self.images: list[Image] = []
        self.tables: dict[str, dict[str, object]] = {}
        self.comparisons: list[dict[str, object]] = []
        self.sweeps = an.sweeps(self.entries)
        self.timelines = an.timelines(self.entries, step_ratio=options.step_ratio)
        self.ops = an.ops_present(self.entries)

    # -- pieces ----------------------------------------------------------------------------

    def image(self, name: str, alt: str, render: Callable[[], bytes]) -> Image:
        path = f"charts/{len(self.images) + 1:02d}-{_slug(name)}.png"
        image = Image(path, alt, render())
        self.images.append(image)
        return image

    def level(self, seconds: float) -> int:
        ms = seconds * 1e3
        if ms >= self.options.crit_ms:
            return 2
        if ms >= self.options.warn_ms:
            return 1
        return 0

    def table(
        self,
        table_id: str,
        title: str,
        grid: an.Grid,
        kind: str,
        op: str | None = None,
        metric: str | None = None,
        note: str = "",
    ) -> Table:
        """A grid as a document table (and its exact numbers for report.json)."""
        rows = []
        data_rows: dict[str, dict[str, object]] = {}
        for row in grid.rows:
            cells = []
            for column in grid.columns:
                cell = grid.get(row, column)
                if cell is None:
                    cells.append(Cell("–"))
                    continue
                value = cell.value
                text = fmt_ms(value.value) if kind == "latency" else fmt_count(value.value)
                if value.approx:
                    text = "≈" + text
                n = len(cell.values)
                if n > 1:
                    text += f" (n={n})"
                hover = "; ".join(sorted(set(cell.sources)))[:500]
                level = self.level(value.value) if kind == "latency" else 0
                cells.append(Cell(text, value.value, level, hover))
                data_rows.setdefault(row, {})[column] = {
                    "value": value.value,
                    "approx": value.approx,
                    "n": n,
                    "values": [v.value for v in cell.values],
                    "sources": cell.sources,
                }
            rows.append((row, cells))
        self.tables[table_id] = {
            "title": title,
            "op": op,
            "metric": metric,
            "unit": "seconds" if kind == "latency" else "per second",
            "columns": grid.columns,
            "rows": data_rows,
        }
        return Table(table_id, title, ["job", *grid.columns], rows, note)

    # -- sections --------------------------------------------------------------------------

    def document(self) -> Document:
        doc = Document(self.options.title)
        doc.sections.append(self.summary())
        for op in self.ops:
            doc.sections.extend(self.op_sections(op))
        nodes = self.node_section()
        if nodes is not None:
            doc.sections.append(nodes)
        if self.options.baseline is not None:
            doc.sections.append(self.comparison_section())
        if self.sweeps:
            doc.sections.append(self.sweep_section())
        if self.timelines:
            doc.sections.append(self.timeline_section())
        contract = self.contract_section()
        if contract is not None:
            doc.sections.append(contract)
        doc.sections.append(self.sources_section())
        doc.sections.append(self.unreadable_section())
        return doc

    def summary(self) -> Section:
        loaded = self.loaded
        o = self.options
        nodes = sorted({e.node for e in self.entries if e.node})
        items = [
            f"inputs: {', '.join(f'`{p}`' for p in self.paths)}",
            f"{loaded.files_read} result files read, {loaded.files_parsed} parsed, "
            f"{len(loaded.unreadable)} unreadable (listed at the end), "
            f"{len(self.entries)} fio jobs",
            f"groups ({o.grouping.by}): {', '.join(self.groups) or '(none)'}"
            + (f"; baseline: {o.baseline}" if o.baseline else ""),
            f"nodes: {', '.join(nodes)}" if nodes else "nodes: (none named)",
            f"latency cells are yellow from {o.warn_ms:g} ms and red from {o.crit_ms:g} ms "
            "(the Markdown marks them with a yellow or red circle)",
            "every number is fio's own (read by fioprobe's exporter reader); a cell of several "
            "runs shows their lower median, so it is always one real run's number, with n; "
            "≈ marks a percentile fio did not print, estimated from the metric contract's "
            "buckets the way Prometheus's histogram_quantile does",
            f"fioprobe {__version__}, {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        ]
        return Section("Summary", [Bullets(items)])

    def op_sections(self, op: str) -> list[Section]:
        section = Section(f"{op} latency")
        first_grid = None
        for metric in an.LATENCY_METRICS:
            grid = an.grid(
                self.entries,
                lambda e, metric=metric, op=op: an.latency_value(e.job.ops.get(op), metric),
                columns=self.groups,
            )
            if not grid.rows:
                continue
            if first_grid is None:
                first_grid = grid
            title = f"{op} {_METRIC_TITLES[metric]} latency (ms), job × group"
            section.blocks.append(self.table(f"{op}-{metric}", title, grid, "latency", op, metric))
        iops = an.grid(self.entries, lambda e: an.iops_value(e, op), columns=self.groups)
        if iops.rows:
            title = f"{op} IOPS, job × group" + (" (fsyncs per second of writing)" if op == "sync"
                                                  else "")  # fmt: skip
            section.blocks.append(self.table(f"{op}-iops", title, iops, "count", op, "iops"))
        if first_grid is not None:
            section.blocks.insert(
                0,
                self.image(
                    f"{op}-p99",
                    f"{op} p99 latency per job and group",
                    lambda: charts.grouped_bars(
                        first_grid,
                        f"{op} p99 latency per job and group",
                        self.options.warn_ms,
                        self.options.crit_ms,
                    ),
                ),
            )
        return [section] if section.blocks else []

    def node_section(self) -> Section | None:
        per_group: dict[str, set[str]] = defaultdict(set)
        for entry in self.entries:
            if entry.node:
                per_group[entry.group].add(entry.node)
        if not any(len(nodes) > 1 for nodes in per_group.values()):
            return None
        section = Section("Per node")
        section.blocks.append(
            Paragraph("p99 and p99.9 per job on every node (columns: group / node).")
        )
        columns = sorted(
            {f"{e.group} / {e.node}" for e in self.entries if e.node}, key=an.natural_key
        )
        for op in self.ops:
            for metric in ("p99", "p99.9"):
                grid = an.grid(
                    [e for e in self.entries if e.node],
                    lambda e, metric=metric, op=op: an.latency_value(e.job.ops.get(op), metric),
                    column_of=lambda e: f"{e.group} / {e.node}",
                    columns=columns,
                )
                if grid.rows:
                    title = f"{op} {metric} latency (ms) per node"
                    section.blocks.append(
                        self.table(f"node-{op}-{metric}", title, grid, "latency", op, metric)
                    )
        return section

    def comparison_section(self) -> Section:
        baseline = self.options.baseline
        assert baseline is not None
        section = Section(f"Against the baseline {baseline}")
        section.blocks.append(
            Paragraph(
                "Ratios are candidate / baseline per job (below 1 is faster for latency, above "
                "1 is more for IOPS); the last row is the geometric mean of the ratios over the "
                "jobs both groups ran."
            )
        )
        charts_made = 0
        for op in self.ops:
            for metric, kind in (("p99", "latency"), ("mean", "latency"), ("iops", "count")):
                if metric == "iops":
                    grid = an.grid(self.entries, lambda e, op=op: an.iops_value(e, op))
                else:
                    grid = an.grid(
                        self.entries,
                        lambda e, metric=metric, op=op: an.latency_value(e.job.ops.get(op), metric),
                    )
                comparisons = an.compare(grid, baseline)
                if not comparisons:
                    continue
                section.blocks.append(self.comparison_table(op, metric, kind, comparisons))
                if metric == "p99" and charts_made < MAX_CHARTS_PER_KIND:
                    for comparison in comparisons[: MAX_CHARTS_PER_KIND - charts_made]:
                        charts_made += 1
                        section.blocks.append(
                            self.image(
                                f"cmp-{op}-{comparison.candidate}",
                                f"{op} p99: {comparison.candidate} against {baseline}",
                                lambda c=comparison, op=op: charts.comparison_bars(c, f"{op} p99"),
                            )
                        )
        if len(section.blocks) == 1:
            section.blocks.append(Paragraph("No job ran both in the baseline and another group."))
        return section

    def comparison_table(
        self, op: str, metric: str, kind: str, comparisons: list[an.Comparison]
    ) -> Table:
        baseline = comparisons[0].baseline
        fmt = fmt_ms if kind == "latency" else fmt_count
        rows_order = sorted({r[0] for c in comparisons for r in c.rows}, key=an.natural_key)
        lookup = {(c.candidate, r[0]): r for c in comparisons for r in c.rows}
        base_values = {r[0]: r[1] for c in comparisons for r in c.rows}
        columns = ["job", f"{baseline} (baseline)"]
        for c in comparisons:
            columns += [c.candidate, f"{c.candidate} / {baseline}"]
        rows = []
        for row in rows_order:
            base = base_values[row]
            cells = [Cell(fmt(base), base, self.level(base) if kind == "latency" else 0)]
            for c in comparisons:
                found = lookup.get((c.candidate, row))
                if found is None:
                    cells += [Cell("–"), Cell("–")]
                    continue
                level = self.level(found[2]) if kind == "latency" else 0
                cells += [Cell(fmt(found[2]), found[2], level), Cell(fmt_ratio(found[3]), found[3])]
            rows.append((row, cells))
        geo_cells = [Cell("")]
        for c in comparisons:
            geomean = c.geomean
            geo_cells += [
                Cell(""),
                Cell(fmt_ratio(geomean), geomean) if geomean else Cell("–"),
            ]
        rows.append(("geometric mean", geo_cells))
        table_id = f"cmp-{op}-{metric}"
        self.comparisons.append(
            {
                "id": table_id,
                "op": op,
                "metric": metric,
                "baseline": baseline,
                "candidates": {
                    c.candidate: {
                        "geomean": c.geomean,
                        "rows": {
                            r[0]: {"baseline": r[1], "candidate": r[2], "ratio": r[3]}
                            for r in c.rows
                        },
                    }
                    for c in comparisons
                },
            }
        )
        unit = "ms" if kind == "latency" else "per second"
        title = f"{op} {metric} ({unit}) against {baseline}"
        return Table(table_id, title, columns, rows)

    def sweep_section(self) -> Section:
        section = Section("Response curves")
        section.blocks.append(
            Paragraph(
                "Latency against IOPS where a job ran at several queue depths (iodepth) or "
                "job counts (numjobs): throughput grows until the device saturates, then only "
                "latency does."
            )
        )
        for index, sweep in enumerate(self.sweeps):
            if index < MAX_CHARTS_PER_KIND:
                section.blocks.append(
                    self.image(
                        f"curve-{sweep.family}-{sweep.option}",
                        f"response curve of {sweep.family}",
                        lambda s=sweep: charts.response_curve(
                            s, self.options.warn_ms, self.options.crit_ms
                        ),
                    )
                )
            rows = []
            for group, points in sorted(sweep.curves.items()):
                for point in points:
                    rows.append(
                        (
                            f"{group}, {sweep.option}={point.setting}",
                            [
                                Cell(fmt_count(point.iops), point.iops),
                                Cell(fmt_ms(point.mean_s), point.mean_s, self.level(point.mean_s)),
                                Cell(fmt_ms(point.p99_s), point.p99_s, self.level(point.p99_s))
                                if point.p99_s is not None
                                else Cell("–"),
                            ],
                        )
                    )
            section.blocks.append(
                Table(
                    f"curve-{index}",
                    f"{sweep.family}: {sweep.op} along the {sweep.option} sweep",
                    ["group, setting", "IOPS", "mean (ms)", "p99 (ms)"],
                    rows,
                )
            )
        return section

    def timeline_section(self) -> Section:
        section = Section("Along consecutive jobs")
        section.blocks.append(
            Paragraph(
                "The same job run again and again (in one fio run or over several runs), in "
                "the order it ran. A volume that runs out of burst credits shows as a step: "
                "IOPS fall to the baseline, latency rises. A step is reported where the medians "
                f"before and after differ by at least ×{self.options.step_ratio:g}."
            )
        )
        ordered = sorted(self.timelines, key=lambda t: (not t.has_step, t.group, t.family))
        steps = []
        for line in ordered:
            where = line.group + (f" / {line.node}" if line.node else "")
            for label, step, fmt in (
                ("IOPS", line.iops_step, fmt_count),
                ("p99", line.p99_step, lambda v: fmt_ms(v) + " ms"),
            ):
                if step is None:
                    continue
                first_after = line.entries[step.at]
                steps.append(
                    f"{line.family} ({line.op}) on {where}: {label} steps from {fmt(step.before)} "
                    f"to {fmt(step.after)} (×{step.ratio:.3g}) at job {step.at + 1} of "
                    f"{len(line.entries)} ({first_after.job.name} in `{first_after.source}`)"
                )
        section.blocks.append(Bullets(steps) if steps else Paragraph("No step found."))
        stepped = [line for line in ordered if line.has_step][:MAX_CHARTS_PER_KIND]
        flat = [line for line in ordered if not line.has_step][:MAX_FLAT_TIMELINE_CHARTS]
        for line in stepped + flat:
            section.blocks.append(
                self.image(
                    f"timeline-{line.group}-{line.family}",
                    f"{line.family} along consecutive jobs in {line.group}",
                    lambda t=line: charts.timeline(t, self.options.warn_ms, self.options.crit_ms),
                )
            )
        return section

    def contract_section(self) -> Section | None:
        section = Section("What Prometheus shows (metric contract buckets)")
        section.blocks.append(
            Paragraph(
                "`fioprobe backfill` loads these results into Prometheus as the live exporter "
                "would have pushed them: cumulative histograms per group with the contract's "
                "buckets. `histogram_quantile(0.99, sum by (le) (fioprobe_<op>_latency_seconds_"
                "bucket{storageclass=GROUP, profile=JOB}))` at the last run then gives the "
                "numbers below: all runs of a cell merged, interpolated inside a bucket, so "
                "they differ from fio's exact percentiles above by up to a bucket's width."
            )
        )
        for op in EXPORTED_OPS:
            merged: dict[tuple[str, str], list[int]] = {}
            sources: dict[tuple[str, str], list[str]] = defaultdict(list)
            for entry in self.entries:
                stats = entry.job.ops.get(op)
                if stats is None:
                    continue
                counts, _, source = op_histogram(stats)
                if source == "none":
                    continue
                key = (entry.row, entry.group)
                total = merged.setdefault(key, [0] * len(counts))
                merged[key] = [a + b for a, b in zip(total, counts, strict=True)]
                sources[key].append(entry.source)
            if not merged:
                continue
            grid = an.Grid(
                sorted({r for r, _ in merged}, key=an.natural_key),
                [g for g in self.groups if any(k[1] == g for k in merged)],
            )
            for key, counts in merged.items():
                estimate = an.bucket_quantile(0.99, cumulative(counts))
                if not math.isnan(estimate):
                    grid.cells[key] = an.CellData([an.Value(estimate)], sources[key])
            title = f"{op} p99 (ms) from the contract histogram, all runs merged"
            section.blocks.append(
                self.table(f"contract-{op}-p99", title, grid, "latency", op, "contract-p99")
            )
        return section if len(section.blocks) > 1 else None

    def sources_section(self) -> Section:
        section = Section("Sources")
        by_source: dict[str, list[Entry]] = defaultdict(list)
        for entry in self.entries:
            by_source[entry.source].append(entry)
        if len(by_source) > MAX_SOURCE_ROWS:
            section.blocks.append(
                Paragraph(f"{len(by_source)} files; every one is listed in report.json.")
            )
            return section
        rows = []
        for source, entries in by_source.items():
            first = entries[0]
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(first.timestamp))
            rows.append(
                (
                    source,
                    [
                        Cell(first.group, None),
                        Cell(first.node or "–"),
                        Cell(", ".join(e.job.name for e in entries)),
                        Cell(first.run.fio_version),
                        Cell(f"{stamp} UTC ({first.timestamp_origin})", first.timestamp),
                    ],
                )
            )
        section.blocks.append(
            Table("sources", "", ["file", "group", "node", "jobs", "fio", "time"], rows)
        )
        return section

    def unreadable_section(self) -> Section:
        section = Section("Unreadable files")
        if not self.loaded.unreadable:
            section.blocks.append(Paragraph("None: every file was read."))
        else:
            section.blocks.append(
                Paragraph(
                    f"{len(self.loaded.unreadable)} files could not be used; the report was "
                    "made from the others."
                )
            )
            section.blocks.append(
                Bullets([f"`{u.name}`: {u.reason}" for u in self.loaded.unreadable])
            )
        return section

    # -- machine-readable ------------------------------------------------------------------

    def data(self) -> dict[str, object]:
        entries = []
        for e in self.entries:
            ops: dict[str, object] = {}
            for op, stats in e.job.ops.items():
                values: dict[str, object] = {}
                for metric in an.LATENCY_METRICS:
                    value = an.latency_value(stats, metric)
                    if value is not None:
                        values[metric] = value.value
                iops = an.iops_value(e, op)
                if iops is not None:
                    values["iops"] = iops.value
                if op in EXPORTED_OPS:
                    counts, total, source = op_histogram(stats)
                    if source != "none":
                        estimate = an.bucket_quantile(0.99, cumulative(counts))
                        values["contract"] = {
                            "source": source,
                            "counts": counts,
                            "sum_seconds": total,
                            "p99": None if math.isnan(estimate) else estimate,
                        }
                if values:
                    ops[op] = values
            entries.append(
                {
                    "source": e.source,
                    "job": e.job.name,
                    "index": e.index,
                    "row": e.row,
                    "family": e.family,
                    "group": e.group,
                    "folder_group": e.folder_group,
                    "node": e.node,
                    "battery": e.battery,
                    "timestamp": e.timestamp,
                    "timestamp_origin": e.timestamp_origin,
                    "fio_version": e.run.fio_version,
                    "options": {k: e.options[k] for k in sorted(e.options)},
                    "ops": ops,
                }
            )
        return _finite(
            {
                "version": JSON_VERSION,
                "title": self.options.title,
                "thresholds_ms": {"warn": self.options.warn_ms, "crit": self.options.crit_ms},
                "grouping": {
                    "by": self.options.grouping.by,
                    "folder_pattern": self.options.grouping.folder_pattern,
                },
                "baseline": self.options.baseline,
                "groups": self.groups,
                "files": {
                    "read": self.loaded.files_read,
                    "parsed": self.loaded.files_parsed,
                    "unreadable": [
                        {"name": u.name, "reason": u.reason} for u in self.loaded.unreadable
                    ],
                },
                "tables": self.tables,
                "comparisons": self.comparisons,
                "sweeps": [
                    {
                        "option": s.option,
                        "family": s.family,
                        "op": s.op,
                        "curves": {
                            g: [
                                {
                                    "setting": p.setting,
                                    "iops": p.iops,
                                    "mean": p.mean_s,
                                    "p99": p.p99_s,
                                    "source": p.source,
                                }
                                for p in points
                            ]
                            for g, points in s.curves.items()
                        },
                    }
                    for s in self.sweeps
                ],
                "timelines": [
                    {
                        "group": t.group,
                        "node": t.node,
                        "family": t.family,
                        "op": t.op,
                        "jobs": [{"source": e.source, "job": e.job.name} for e in t.entries],
                        "iops": t.iops,
                        "p99": t.p99_s,
                        "iops_step": _step(t.iops_step),
                        "p99_step": _step(t.p99_step),
                    }
                    for t in self.timelines
                ],
                "charts": [image.path for image in self.images],
                "entries": entries,
            }
        )


def _step(step: an.Step | None) -> dict[str, float] | None:
    if step is None:
        return None
    return {"at": step.at, "before": step.before, "after": step.after, "ratio": step.ratio}


def _finite(obj: object) -> object:
    """JSON has no NaN/Infinity: they become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
