"""report.json: the report's exact numbers for machines, from the same content as the
document (every table cell with the runs behind it, comparisons, sweeps, timelines, and
each fio job's values)."""

from __future__ import annotations

import math

from fioprobe.metrics.histogram import cumulative, op_histogram
from fioprobe.metrics.table import EXPORTED_OPS
from fioprobe.report import analysis as an
from fioprobe.report.content import ComparisonTable, Content, GridTable
from fioprobe.report.verdict_view import spread_data, verdict_data
from fioprobe.results.load import Entry

#: Raised when the layout of report.json changes in a way its readers must know.
JSON_VERSION = 1


def report_data(content: Content, charts: list[str]) -> dict[str, object]:
    """The whole report.json; `charts` are the document's chart paths, in order."""
    options = content.options
    loaded = content.loaded
    return _finite_fields(
        {
            "version": JSON_VERSION,
            "title": options.title,
            "thresholds_ms": {"warn": options.warn_ms, "crit": options.crit_ms},
            "grouping": {
                "by": options.grouping.by,
                "folder_pattern": options.grouping.folder_pattern,
            },
            "baseline": options.baseline,
            "groups": content.groups,
            "files": {
                "read": loaded.files_read,
                "parsed": loaded.files_parsed,
                "unreadable": [{"name": u.name, "reason": u.reason} for u in loaded.unreadable],
            },
            "tables": {table.id: _table(table) for table in content.tables},
            "comparisons": [_comparison(table) for table in content.comparisons],
            "sweeps": [_sweep(sweep) for sweep in content.sweeps],
            "timelines": [_timeline(line) for line in content.timelines],
            "verdicts": verdict_data(content.verdicts),
            "spread": spread_data(content.spreads),
            "charts": charts,
            "entries": [_entry(entry) for entry in content.entries],
        }
    )


def _table(table: GridTable) -> dict[str, object]:
    grid = table.grid
    rows: dict[str, dict[str, object]] = {}
    for row in grid.rows:
        for column in grid.columns:
            cell = grid.get(row, column)
            if cell is not None:
                rows.setdefault(row, {})[column] = {
                    "value": cell.value.value,
                    "approx": cell.value.approx,
                    "n": len(cell.values),
                    "values": [v.value for v in cell.values],
                    "sources": cell.sources,
                }
    return {
        "title": table.title,
        "op": table.op,
        "metric": table.metric,
        "unit": "seconds" if table.kind == "latency" else "per second",
        "columns": grid.columns,
        "rows": rows,
    }


def _comparison(table: ComparisonTable) -> dict[str, object]:
    return {
        "id": table.id,
        "op": table.op,
        "metric": table.metric,
        "baseline": table.comparisons[0].baseline,
        "candidates": {
            c.candidate: {
                "geomean": c.geomean,
                "rows": {
                    r[0]: {"baseline": r[1], "candidate": r[2], "ratio": r[3]} for r in c.rows
                },
            }
            for c in table.comparisons
        },
    }


def _sweep(sweep: an.Sweep) -> dict[str, object]:
    return {
        "option": sweep.option,
        "family": sweep.family,
        "op": sweep.op,
        "curves": {
            group: [
                {
                    "setting": p.setting,
                    "iops": p.iops,
                    "mean": p.mean_s,
                    "p99": p.p99_s,
                    "source": p.source,
                    "runs": p.runs,
                    "iops_sd": p.iops_sd,
                    "mean_sd": p.mean_sd,
                    "p99_sd": p.p99_sd,
                    "sources": p.sources,
                }
                for p in points
            ]
            for group, points in sweep.curves.items()
        },
    }


def _timeline(line: an.Timeline) -> dict[str, object]:
    return {
        "group": line.group,
        "node": line.node,
        "family": line.family,
        "op": line.op,
        "jobs": [{"source": e.source, "job": e.job.name} for e in line.entries],
        "iops": line.iops,
        "p99": line.p99_s,
        "iops_step": _step(line.iops_step),
        "p99_step": _step(line.p99_step),
    }


def _entry(entry: Entry) -> dict[str, object]:
    ops: dict[str, object] = {}
    for op, stats in entry.job.ops.items():
        values: dict[str, object] = {}
        for metric in an.LATENCY_METRICS:
            value = an.latency_value(stats, metric)
            if value is not None:
                values[metric] = value.value
        iops = an.iops_value(entry, op)
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
    return {
        "source": entry.source,
        "job": entry.job.name,
        "index": entry.index,
        "row": entry.row,
        "family": entry.family,
        "group": entry.group,
        "folder_group": entry.folder_group,
        "node": entry.node,
        "battery": entry.battery,
        "timestamp": entry.timestamp,
        "timestamp_origin": entry.timestamp_origin,
        "fio_version": entry.run.fio_version,
        "options": {k: entry.options[k] for k in sorted(entry.options)},
        "ops": ops,
    }


def _step(step: an.Step | None) -> dict[str, float] | None:
    if step is None:
        return None
    return {"at": step.at, "before": step.before, "after": step.after, "ratio": step.ratio}


def _finite_fields(obj: dict[str, object]) -> dict[str, object]:
    """`_finite` of a JSON object, whose keys stay as they are."""
    return {k: _finite(v) for k, v in obj.items()}


def _finite(obj: object) -> object:
    """JSON has no NaN/Infinity: they become null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
