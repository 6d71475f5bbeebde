"""PNG charts with matplotlib's Agg backend (no display, no pyplot global state).

Each function returns PNG bytes. Figures are built with `matplotlib.figure.Figure` directly,
so nothing depends on a GUI backend or on pyplot's implicit current figure.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fioprobe.report.analysis import Comparison, Grid, Sweep, Timeline

#: Most rows a bar chart draws; the tables always hold every row.
MAX_BAR_ROWS = 40
_DPI = 100


def _png(figure: Figure) -> bytes:
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    # One draw: constrained layout instead of bbox_inches="tight" (which draws twice).
    figure.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _ms(seconds: float | None) -> float:
    return math.nan if seconds is None else seconds * 1e3


def _thresholds(axes: Axes, warn_ms: float, crit_ms: float, vertical: bool) -> None:
    line = axes.axvline if vertical else axes.axhline
    line(warn_ms, color="#d4a200", linestyle="--", linewidth=1, label=f"{warn_ms:g} ms")
    line(crit_ms, color="#c00000", linestyle="--", linewidth=1, label=f"{crit_ms:g} ms")


def grouped_bars(
    table: Grid, title: str, warn_ms: float, crit_ms: float, xlabel: str = "latency (ms)"
) -> bytes:
    """Horizontal bars: one cluster per row, one bar per column group (values in seconds)."""
    rows = table.rows[:MAX_BAR_ROWS]
    columns = table.columns
    height = max(2.5, 0.28 * len(rows) * max(1, min(len(columns), 4)) + 1.2)
    figure = Figure(figsize=(9, min(height, 30)), layout="constrained")
    axes = figure.add_subplot()
    bar = 0.8 / max(1, len(columns))
    for index, column in enumerate(columns):
        values = []
        for row in rows:
            cell = table.get(row, column)
            values.append(_ms(cell.value.value) if cell else math.nan)
        positions = [r + index * bar for r in range(len(rows))]
        axes.barh(positions, values, height=bar, label=column)
    axes.set_yticks([r + bar * (len(columns) - 1) / 2 for r in range(len(rows))])
    axes.set_yticklabels([_short(r) for r in rows], fontsize=8)
    axes.invert_yaxis()
    _thresholds(axes, warn_ms, crit_ms, vertical=True)
    _log_if_wide(axes, [c.value.value * 1e3 for c in table.cells.values()], "x")
    axes.set_xlabel(xlabel)
    axes.set_title(title + (f" (first {MAX_BAR_ROWS} rows)" if len(table.rows) > len(rows) else ""))
    axes.legend(fontsize=8, loc="best")
    axes.grid(axis="x", alpha=0.3)
    return _png(figure)


def comparison_bars(comparison: Comparison, title: str, unit: str = "ms") -> bytes:
    """Baseline against candidate per row, with the geometric-mean ratio in the title."""
    rows = comparison.rows[:MAX_BAR_ROWS]
    scale = 1e3 if unit == "ms" else 1.0
    figure = Figure(figsize=(9, max(2.5, 0.5 * len(rows) + 1.2)), layout="constrained")
    axes = figure.add_subplot()
    positions = list(range(len(rows)))
    axes.barh([p - 0.2 for p in positions], [r[1] * scale for r in rows], height=0.4,
              label=f"{comparison.baseline} (baseline)", color="#7f7f7f")  # fmt: skip
    axes.barh([p + 0.2 for p in positions], [r[2] * scale for r in rows], height=0.4,
              label=comparison.candidate, color="#1f77b4")  # fmt: skip
    for position, (_, _, candidate, ratio) in zip(positions, rows, strict=True):
        axes.annotate(f"×{ratio:.2f}", (candidate * scale, position + 0.2), fontsize=7,
                      xytext=(3, -3), textcoords="offset points")  # fmt: skip
    axes.set_yticks(positions)
    axes.set_yticklabels([_short(r[0]) for r in rows], fontsize=8)
    axes.invert_yaxis()
    _log_if_wide(axes, [v * scale for r in rows for v in r[1:3]], "x")
    geomean = comparison.geomean
    suffix = f", geometric mean ×{geomean:.3f}" if geomean else ""
    axes.set_title(f"{title}: {comparison.candidate} / {comparison.baseline}{suffix}")
    axes.set_xlabel(unit)
    axes.legend(fontsize=8)
    axes.grid(axis="x", alpha=0.3)
    return _png(figure)


def response_curve(sweep: Sweep, warn_ms: float, crit_ms: float) -> bytes:
    """Latency against IOPS along an iodepth/numjobs sweep, one line per group."""
    figure = Figure(figsize=(9, 5), layout="constrained")
    axes = figure.add_subplot()
    latencies: list[float] = []
    for index, (group, points) in enumerate(sorted(sweep.curves.items())):
        color = f"C{index % 10}"
        xs = [p.iops for p in points]
        means = [_ms(p.mean_s) for p in points]
        # Repeated runs of a setting: error bars of one standard deviation both ways.
        repeated = any(p.runs > 1 for p in points)
        xerr = [p.iops_sd for p in points] if repeated else None
        label = f"{group} mean" + (" (± 1 sd over runs)" if repeated else "")
        axes.errorbar(xs, means, yerr=[_ms(p.mean_sd) for p in points] if repeated else None,
                      xerr=xerr, marker="o", color=color, label=label, capsize=3)  # fmt: skip
        latencies += means
        if all(p.p99_s is not None for p in points):
            p99s = [_ms(p.p99_s) for p in points]
            p99_err = [_ms(p.p99_sd or 0.0) for p in points] if repeated else None
            axes.errorbar(xs, p99s, yerr=p99_err, xerr=xerr, marker="s", linestyle="--",
                          color=color, label=f"{group} p99", capsize=3)  # fmt: skip
            latencies += p99s
        for point, y in zip(points, means, strict=True):
            axes.annotate(f"{sweep.option}={point.setting}", (point.iops, y), fontsize=7,
                          xytext=(4, 4), textcoords="offset points")  # fmt: skip
    _thresholds(axes, warn_ms, crit_ms, vertical=False)
    _log_if_wide(axes, latencies, "y")
    axes.set_xlabel("IOPS")
    axes.set_ylabel(f"{sweep.op} latency (ms)")
    axes.set_title(f"Response curve: {sweep.family} ({sweep.op}), {sweep.option} sweep")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return _png(figure)


def timeline(line: Timeline, warn_ms: float, crit_ms: float) -> bytes:
    """IOPS and p99 along consecutive jobs, with a detected step marked."""
    figure = Figure(figsize=(9, 5.5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    xs = list(range(1, len(line.entries) + 1))
    top.plot(xs, line.iops, marker="o", color="C0")
    top.set_ylabel(f"{line.op} IOPS")
    _log_if_wide(top, line.iops, "y")
    p99 = [_ms(v) for v in line.p99_s]
    bottom.plot(xs, p99, marker="o", color="C3")
    bottom.set_ylabel(f"{line.op} p99 (ms)")
    _thresholds(bottom, warn_ms, crit_ms, vertical=False)
    _log_if_wide(bottom, p99, "y")
    for axes, step in ((top, line.iops_step), (bottom, line.p99_step)):
        if step is not None:
            axes.axvline(step.at + 0.5, color="#444", linestyle=":", linewidth=1.5)
            axes.annotate(f"step ×{step.ratio:.3g}", (step.at + 0.5, 0.9),
                          xycoords=("data", "axes fraction"), fontsize=8)  # fmt: skip
        axes.grid(alpha=0.3)
    bottom.set_xlabel("consecutive job (in the order they ran)")
    where = f"{line.group}" + (f" / {line.node}" if line.node else "")
    top.set_title(f"{line.family} ({line.op}) along consecutive jobs, {where}")
    return _png(figure)


def _log_if_wide(axes: Axes, values: Sequence[float | None], axis: str) -> None:
    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if positive and max(positive) / min(positive) > 100:
        (axes.set_xscale if axis == "x" else axes.set_yscale)("log")


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
