"""The report's tables as a reader sees them: fio's numbers formatted, latency cells coloured
by the report's thresholds, each cell's runs behind it as hover text."""

from __future__ import annotations

from fioprobe.report.analysis import natural_key
from fioprobe.report.content import ComparisonTable, GridTable
from fioprobe.report.document import Cell, Table
from fioprobe.report.format import fmt_count, fmt_ms, fmt_ratio
from fioprobe.report.options import ReportOptions


def level(seconds: float, options: ReportOptions) -> int:
    """0 normal, 1 yellow (from warn_ms), 2 red (from crit_ms)."""
    ms = seconds * 1e3
    if ms >= options.crit_ms:
        return 2
    if ms >= options.warn_ms:
        return 1
    return 0


def grid_table(table: GridTable, options: ReportOptions) -> Table:
    latency = table.kind == "latency"
    rows = []
    for row in table.grid.rows:
        cells = []
        for column in table.grid.columns:
            cell = table.grid.get(row, column)
            if cell is None:
                cells.append(Cell("–"))
                continue
            value = cell.value
            text = fmt_ms(value.value) if latency else fmt_count(value.value)
            if value.approx:
                text = "≈" + text
            if len(cell.values) > 1:
                text += f" (n={len(cell.values)})"
            hover = "; ".join(sorted(set(cell.sources)))[:500]
            colour = level(value.value, options) if latency else 0
            cells.append(Cell(text, value.value, colour, hover))
        rows.append((row, cells))
    return Table(table.id, table.title, ["job", *table.grid.columns], rows)


def comparison_table(table: ComparisonTable, options: ReportOptions) -> Table:
    comparisons = table.comparisons
    baseline = comparisons[0].baseline
    latency = table.kind == "latency"
    fmt = fmt_ms if latency else fmt_count

    def cell(value: float) -> Cell:
        return Cell(fmt(value), value, level(value, options) if latency else 0)

    rows_order = sorted({r[0] for c in comparisons for r in c.rows}, key=natural_key)
    lookup = {(c.candidate, r[0]): r for c in comparisons for r in c.rows}
    base_values = {r[0]: r[1] for c in comparisons for r in c.rows}
    columns = ["job", f"{baseline} (baseline)"]
    for c in comparisons:
        columns += [c.candidate, f"{c.candidate} / {baseline}"]
    rows = []
    for row in rows_order:
        cells = [cell(base_values[row])]
        for c in comparisons:
            found = lookup.get((c.candidate, row))
            if found is None:
                cells += [Cell("–"), Cell("–")]
            else:
                cells += [cell(found[2]), Cell(fmt_ratio(found[3]), found[3])]
        rows.append((row, cells))
    geo_cells = [Cell("")]
    for c in comparisons:
        geomean = c.geomean
        geo_cells += [Cell(""), Cell(fmt_ratio(geomean), geomean) if geomean else Cell("–")]
    rows.append(("geometric mean", geo_cells))
    unit = "ms" if latency else "per second"
    title = f"{table.op} {table.metric} ({unit}) against {baseline}"
    return Table(table.id, title, columns, rows)
