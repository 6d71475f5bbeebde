"""What a report says, as data: every table, comparison, sweep and timeline of the results.

Computed once from the loaded results; the document (report.md and report.html, `sections`)
and report.json (`report_json`) are both rendered from it, so a number in one is the same
number in the other.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from fioprobe.metrics.histogram import cumulative, op_histogram
from fioprobe.metrics.table import EXPORTED_OPS
from fioprobe.report import analysis as an
from fioprobe.report import significance as sig
from fioprobe.report import verdict as vd
from fioprobe.report.options import ReportOptions
from fioprobe.results.load import Entry, Loaded

_METRIC_TITLES = {
    "p99": "p99",
    "p99.9": "p99.9",
    "mean": "mean",
    "max": "max",
    "stddev": "standard deviation",
}


@dataclass(frozen=True, slots=True)
class GridTable:
    """One table of fio's numbers: jobs x groups (or nodes)."""

    id: str
    title: str
    grid: an.Grid
    #: "latency" (seconds, coloured by threshold) or "count" (per second).
    kind: str
    op: str | None = None
    metric: str | None = None


@dataclass(frozen=True, slots=True)
class ComparisonTable:
    """Every candidate group against the baseline, for one operation and metric."""

    id: str
    op: str
    metric: str
    kind: str
    comparisons: list[an.Comparison]


@dataclass(slots=True)
class Content:
    loaded: Loaded
    options: ReportOptions
    groups: list[str]
    paths: list[str]
    ops: list[str]
    #: Per operation, its latency tables then its IOPS table.
    op_tables: dict[str, list[GridTable]]
    #: Per-node tables, or None when no group ran on more than one node.
    node_tables: list[GridTable] | None
    comparisons: list[ComparisonTable]
    #: p99 from the metric contract's buckets, as Prometheus would show it.
    contract_tables: list[GridTable]
    sweeps: list[an.Sweep]
    timelines: list[an.Timeline]
    #: Per candidate group, the statistical verdict against the baseline.
    verdicts: list[vd.CandidateVerdict] = field(default_factory=list)
    #: row -> group -> metric -> mean and standard deviation of repeated runs.
    spreads: dict[str, dict[str, dict[str, sig.Spread]]] = field(default_factory=dict)

    @property
    def entries(self) -> list[Entry]:
        return self.loaded.entries

    @property
    def tables(self) -> list[GridTable]:
        """Every grid table in document order (report.json lists them so)."""
        ops = [table for tables in self.op_tables.values() for table in tables]
        return [*ops, *(self.node_tables or []), *self.contract_tables]


def collect(loaded: Loaded, options: ReportOptions, groups: list[str], paths: list[str]) -> Content:
    entries = loaded.entries
    ops = an.ops_present(entries)
    return Content(
        loaded=loaded,
        options=options,
        groups=groups,
        paths=paths,
        ops=ops,
        op_tables={op: op_tables(entries, groups, op) for op in ops},
        node_tables=node_tables(entries, ops),
        comparisons=comparison_tables(entries, ops, options.baseline),
        contract_tables=contract_tables(entries, groups),
        sweeps=an.sweeps(entries),
        timelines=an.timelines(entries, step_ratio=options.step_ratio),
        verdicts=vd.verdicts(entries, options.baseline),
        spreads=vd.spreads(entries),
    )


def _latency_of(metric: str, op: str) -> Callable[[Entry], an.Value | None]:
    return lambda entry: an.latency_value(entry.job.ops.get(op), metric)


def op_tables(entries: list[Entry], groups: list[str], op: str) -> list[GridTable]:
    tables = []
    for metric in an.LATENCY_METRICS:
        grid = an.grid(entries, _latency_of(metric, op), columns=groups)
        if grid.rows:
            title = f"{op} {_METRIC_TITLES[metric]} latency (ms), job × group"
            tables.append(GridTable(f"{op}-{metric}", title, grid, "latency", op, metric))
    iops = an.grid(entries, lambda e: an.iops_value(e, op), columns=groups)
    if iops.rows:
        title = f"{op} IOPS, job × group" + (" (fsyncs per second of writing)" if op == "sync"
                                              else "")  # fmt: skip
        tables.append(GridTable(f"{op}-iops", title, iops, "count", op, "iops"))
    return tables


def node_tables(entries: list[Entry], ops: list[str]) -> list[GridTable] | None:
    per_group: dict[str, set[str]] = defaultdict(set)
    for entry in entries:
        if entry.node:
            per_group[entry.group].add(entry.node)
    if not any(len(nodes) > 1 for nodes in per_group.values()):
        return None
    on_nodes = [e for e in entries if e.node]
    columns = sorted({f"{e.group} / {e.node}" for e in on_nodes}, key=an.natural_key)
    tables = []
    for op in ops:
        for metric in ("p99", "p99.9"):
            grid = an.grid(
                on_nodes,
                _latency_of(metric, op),
                column_of=lambda e: f"{e.group} / {e.node}",
                columns=columns,
            )
            if grid.rows:
                title = f"{op} {metric} latency (ms) per node"
                tables.append(GridTable(f"node-{op}-{metric}", title, grid, "latency", op, metric))
    return tables


def comparison_tables(
    entries: list[Entry], ops: list[str], baseline: str | None
) -> list[ComparisonTable]:
    if baseline is None:
        return []
    tables = []
    for op in ops:
        for metric, kind in (("p99", "latency"), ("mean", "latency"), ("iops", "count")):
            if metric == "iops":
                grid = an.grid(entries, functools.partial(an.iops_value, op=op))
            else:
                grid = an.grid(entries, _latency_of(metric, op))
            comparisons = an.compare(grid, baseline)
            if comparisons:
                tables.append(ComparisonTable(f"cmp-{op}-{metric}", op, metric, kind, comparisons))
    return tables


def contract_tables(entries: list[Entry], groups: list[str]) -> list[GridTable]:
    """Per cell, all runs merged into the contract's buckets and their p99 estimated as
    histogram_quantile does."""
    tables = []
    for op in EXPORTED_OPS:
        merged: dict[tuple[str, str], list[int]] = {}
        sources: dict[tuple[str, str], list[str]] = defaultdict(list)
        for entry in entries:
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
            [g for g in groups if any(k[1] == g for k in merged)],
        )
        for key, counts in merged.items():
            estimate = an.bucket_quantile(0.99, cumulative(counts))
            if not math.isnan(estimate):
                grid.cells[key] = an.CellData([an.Value(estimate)], sources[key])
        title = f"{op} p99 (ms) from the contract histogram, all runs merged"
        tables.append(GridTable(f"contract-{op}-p99", title, grid, "latency", op, "contract-p99"))
    return tables
