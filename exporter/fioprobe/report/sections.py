"""The report as a document: its sections in reading order, with tables and charts.

Rendered from `content.Content` (the numbers) into `document.Document`, which is written as
Markdown and HTML; the charts are drawn here, numbered in the order they appear.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable

from fioprobe import __version__
from fioprobe.report import analysis as an
from fioprobe.report import charts
from fioprobe.report.content import Content
from fioprobe.report.document import Bullets, Cell, Document, Image, Paragraph, Section, Table
from fioprobe.report.format import fmt_count, fmt_ms, slug
from fioprobe.report.options import ReportOptions
from fioprobe.report.tables import comparison_table, grid_table, level
from fioprobe.report.verdict_view import spread_section, summary_lines, verdict_section
from fioprobe.results.load import Entry
from fioprobe.results.run_time import format_run_time, run_time_problem

#: At most this many charts of one kind (tables always hold everything).
MAX_CHARTS_PER_KIND = 12
#: Timelines without a step are drawn up to this many (those with a step up to the above).
MAX_FLAT_TIMELINE_CHARTS = 4
#: Up to this many sources get a row in the "Sources" table (all are in report.json).
MAX_SOURCE_ROWS = 300


def render(content: Content) -> tuple[Document, list[Image]]:
    """The document and its charts (paths charts/NN-name.png, in order of appearance)."""
    sections = _Sections(content)
    return sections.document(), sections.images


class _Sections:
    def __init__(self, content: Content) -> None:
        self.content = content
        self.options = content.options
        self.images: list[Image] = []

    def image(self, name: str, alt: str, render: Callable[[], bytes]) -> Image:
        path = f"charts/{len(self.images) + 1:02d}-{slug(name)}.png"
        image = Image(path, alt, render())
        self.images.append(image)
        return image

    def document(self) -> Document:
        content = self.content
        doc = Document(self.options.title)
        doc.sections.append(self.summary())
        for op in content.ops:
            doc.sections.extend(self.op_section(op))
        if content.node_tables is not None:
            doc.sections.append(self.node_section())
        if self.options.baseline is not None:
            doc.sections.append(self.comparison_section())
            doc.sections.append(verdict_section(content.verdicts, self.options.baseline))
        if content.spreads:
            doc.sections.append(spread_section(content.spreads))
        if content.sweeps:
            doc.sections.append(self.sweep_section())
        if content.timelines:
            doc.sections.append(self.timeline_section())
        if content.contract_tables:
            doc.sections.append(self.contract_section())
        doc.sections.append(self.sources_section())
        doc.sections.append(self.unreadable_section())
        return doc

    def summary(self) -> Section:
        content, o = self.content, self.options
        loaded = content.loaded
        nodes = sorted({e.node for e in content.entries if e.node})
        items = [
            f"inputs: {', '.join(f'`{p}`' for p in content.paths)}",
            f"{loaded.files_read} result files read, {loaded.files_parsed} parsed, "
            f"{len(loaded.unreadable)} unreadable (listed at the end), "
            f"{len(content.entries)} fio jobs",
            f"groups ({o.grouping.by}): {', '.join(content.groups) or '(none)'}"
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
        items += [f"verdict: {line}" for line in summary_lines(content.verdicts)]
        return Section("Summary", [Bullets(items)])

    def op_section(self, op: str) -> list[Section]:
        tables = self.content.op_tables[op]
        if not tables:
            return []
        section = Section(f"{op} latency", [grid_table(t, self.options) for t in tables])
        first = next((t for t in tables if t.kind == "latency"), None)
        if first is not None:
            title = f"{op} p99 latency per job and group"
            o = self.options
            chart = self.image(
                f"{op}-p99",
                title,
                lambda: charts.grouped_bars(first.grid, title, o.warn_ms, o.crit_ms),
            )
            section.blocks.insert(0, chart)
        return [section]

    def node_section(self) -> Section:
        section = Section("Per node")
        section.blocks.append(
            Paragraph("p99 and p99.9 per job on every node (columns: group / node).")
        )
        section.blocks.extend(grid_table(t, self.options) for t in self.content.node_tables or [])
        return section

    def comparison_section(self) -> Section:
        baseline = self.options.baseline
        intro = Paragraph(
            "Ratios are candidate / baseline per job (below 1 is faster for latency, above "
            "1 is more for IOPS); the last row is the geometric mean of the ratios over the "
            "jobs both groups ran."
        )
        section = Section(f"Against the baseline {baseline}", [intro])
        charts_made = 0
        for table in self.content.comparisons:
            section.blocks.append(comparison_table(table, self.options))
            if table.metric != "p99" or charts_made >= MAX_CHARTS_PER_KIND:
                continue
            for comparison in table.comparisons[: MAX_CHARTS_PER_KIND - charts_made]:
                charts_made += 1
                section.blocks.append(
                    self.image(
                        f"cmp-{table.op}-{comparison.candidate}",
                        f"{table.op} p99: {comparison.candidate} against {baseline}",
                        functools.partial(charts.comparison_bars, comparison, f"{table.op} p99"),
                    )
                )
        if len(section.blocks) == 1:
            section.blocks.append(Paragraph("No job ran both in the baseline and another group."))
        return section

    def sweep_section(self) -> Section:
        intro = Paragraph(
            "Latency against IOPS where a job ran at several queue depths (iodepth) or "
            "job counts (numjobs): throughput grows until the device saturates, then only "
            "latency does."
        )
        section = Section("Response curves", [intro])
        o = self.options
        for index, sweep in enumerate(self.content.sweeps):
            if index < MAX_CHARTS_PER_KIND:
                section.blocks.append(
                    self.image(
                        f"curve-{sweep.family}-{sweep.option}",
                        f"response curve of {sweep.family}",
                        functools.partial(charts.response_curve, sweep, o.warn_ms, o.crit_ms),
                    )
                )
            section.blocks.append(_sweep_table(index, sweep, o))
        return section

    def timeline_section(self) -> Section:
        intro = Paragraph(
            "The same job run again and again (in one fio run or over several runs), in "
            "the order it ran. A volume that runs out of burst credits shows as a step: "
            "IOPS fall to the baseline, latency rises. A step is reported where the medians "
            f"before and after differ by at least ×{self.options.step_ratio:g}."
        )
        section = Section("Along consecutive jobs", [intro])
        ordered = sorted(self.content.timelines, key=lambda t: (not t.has_step, t.group, t.family))
        steps = [text for line in ordered for text in _step_texts(line)]
        section.blocks.append(Bullets(steps) if steps else Paragraph("No step found."))
        stepped = [line for line in ordered if line.has_step][:MAX_CHARTS_PER_KIND]
        flat = [line for line in ordered if not line.has_step][:MAX_FLAT_TIMELINE_CHARTS]
        o = self.options
        for line in stepped + flat:
            section.blocks.append(
                self.image(
                    f"timeline-{line.group}-{line.family}",
                    f"{line.family} along consecutive jobs in {line.group}",
                    functools.partial(charts.timeline, line, o.warn_ms, o.crit_ms),
                )
            )
        return section

    def contract_section(self) -> Section:
        intro = Paragraph(
            "`fioprobe backfill` loads these results into Prometheus as the live exporter "
            "would have pushed them: cumulative histograms per group with the contract's "
            "buckets. `histogram_quantile(0.99, sum by (le) (fioprobe_<op>_latency_seconds_"
            "bucket{storageclass=GROUP, profile=JOB}))` at the last run then gives the "
            "numbers below: all runs of a cell merged, interpolated inside a bucket, so "
            "they differ from fio's exact percentiles above by up to a bucket's width."
        )
        section = Section("What Prometheus shows (metric contract buckets)", [intro])
        section.blocks.extend(grid_table(t, self.options) for t in self.content.contract_tables)
        return section

    def sources_section(self) -> Section:
        section = Section("Sources")
        by_source: dict[str, list[Entry]] = defaultdict(list)
        for entry in self.content.entries:
            by_source[entry.source].append(entry)
        if len(by_source) > MAX_SOURCE_ROWS:
            section.blocks.append(
                Paragraph(f"{len(by_source)} files; every one is listed in report.json.")
            )
            return section
        rows = [(source, _source_cells(entries)) for source, entries in by_source.items()]
        section.blocks.append(
            Table("sources", "", ["file", "group", "node", "jobs", "fio", "time"], rows)
        )
        return section

    def unreadable_section(self) -> Section:
        unreadable = self.content.loaded.unreadable
        section = Section("Unreadable files")
        if not unreadable:
            section.blocks.append(Paragraph("None: every file was read."))
            return section
        count = len(unreadable)
        section.blocks.append(
            Paragraph(f"{count} files could not be used; the report was made from the others.")
        )
        section.blocks.append(Bullets([f"`{u.name}`: {u.reason}" for u in unreadable]))
        return section


def _sweep_table(index: int, sweep: an.Sweep, options: ReportOptions) -> Table:
    repeated = any(p.runs > 1 for points in sweep.curves.values() for p in points)
    rows = []
    for group, points in sorted(sweep.curves.items()):
        for point in points:
            p99 = (
                Cell(fmt_ms(point.p99_s), point.p99_s, level(point.p99_s, options))
                if point.p99_s is not None
                else Cell("–")
            )
            rows.append(
                (
                    f"{group}, {sweep.option}={point.setting}",
                    [
                        Cell(fmt_count(point.iops), point.iops),
                        Cell(fmt_ms(point.mean_s), point.mean_s, level(point.mean_s, options)),
                        p99,
                        *_sweep_spread(point, repeated),
                    ],
                )
            )
    columns = ["group, setting", "IOPS", "mean (ms)", "p99 (ms)"]
    if repeated:
        columns += ["runs", "IOPS sd", "mean sd (ms)", "p99 sd (ms)"]
    return Table(
        f"curve-{index}",
        f"{sweep.family}: {sweep.op} along the {sweep.option} sweep"
        + (" (means over repeated runs)" if repeated else ""),
        columns,
        rows,
    )


def _sweep_spread(point: an.SweepPoint, repeated: bool) -> list[Cell]:
    """Runs and standard deviations of a point, when some setting ran more than once."""
    if not repeated:
        return []
    p99_sd = Cell("–") if point.p99_sd is None else Cell(fmt_ms(point.p99_sd), point.p99_sd)
    return [
        Cell(str(point.runs), point.runs),
        Cell(fmt_count(point.iops_sd), point.iops_sd),
        Cell(fmt_ms(point.mean_sd), point.mean_sd),
        p99_sd,
    ]


def _step_texts(line: an.Timeline) -> list[str]:
    """One sentence per step (IOPS, p99) found along one timeline."""
    where = line.group + (f" / {line.node}" if line.node else "")
    texts = []
    for label, step, fmt in (
        ("IOPS", line.iops_step, fmt_count),
        ("p99", line.p99_step, lambda v: fmt_ms(v) + " ms"),
    ):
        if step is None:
            continue
        first_after = line.entries[step.at]
        texts.append(
            f"{line.family} ({line.op}) on {where}: {label} steps from {fmt(step.before)} "
            f"to {fmt(step.after)} (×{step.ratio:.3g}) at job {step.at + 1} of "
            f"{len(line.entries)} ({first_after.job.name} in `{first_after.source}`)"
        )
    return texts


def _source_cells(entries: list[Entry]) -> list[Cell]:
    first = entries[0]
    stamp = format_run_time(first.timestamp)
    # A time no fio run can have (a zeroed tar header, a clock never set, an edit) is shown
    # as it is, but marked, so that the order it gives the timelines is not taken for real.
    problem = run_time_problem(first.timestamp)
    doubt = f"; implausible: {problem}" if problem else ""
    return [
        Cell(first.group, None),
        Cell(first.node or "–"),
        Cell(", ".join(e.job.name for e in entries)),
        Cell(first.run.fio_version),
        Cell(f"{stamp} ({first.timestamp_origin}{doubt})", first.timestamp),
    ]
