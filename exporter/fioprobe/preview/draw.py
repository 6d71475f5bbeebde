"""A dashboard's evaluated panels (`preview.evaluate`) drawn as one picture, without Grafana.

Each panel sits where the dashboard's 24-column grid puts it: time series as lines (with
dashed threshold lines), bar gauges as bars coloured by threshold, stats as coloured
numbers, tables as tables, the heatmap as a heatmap; units follow each panel's unit.
Needs matplotlib (the `report` and `demo` extras).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

#: Grafana's named colours (the ones the dashboards use) and its classic palette.
COLORS = {
    "green": "#73BF69",
    "yellow": "#FADE2A",
    "orange": "#FF9830",
    "red": "#F2495C",
    "dark-red": "#C4162A",
    "blue": "#5794F2",
    "text": "#444444",
}
PALETTE = [
    "#7EB26D",
    "#EAB839",
    "#6ED0E0",
    "#EF843C",
    "#E24D42",
    "#1F78C1",
    "#BA43A9",
    "#705DA0",
    "#508642",
    "#CCA300",
    "#447EBC",
    "#C15C17",
    "#890F02",
    "#0A437C",
]
#: Inches per Grafana grid column and grid row (a row is 30 px, a column 1/24 of ~1,900 px).
COLUMN_IN, ROW_IN = 0.85, 0.42


# --- units --------------------------------------------------------------------------------


def unit_scale(unit: str, largest: float) -> tuple[float, str]:
    """(factor, axis label) that turns a panel unit's base values into readable numbers."""
    if unit == "s":
        return (1000.0, "ms") if largest < 2 else (1.0, "s")
    if unit == "Bps":
        return 1 / 2**20, "MiB/s"
    if unit == "bytes":
        return 1 / 2**20, "MiB"
    if unit == "percentunit":
        return 100.0, "%"
    if unit == "percent":
        return 1.0, "%"
    if unit == "iops":
        return 1.0, "IOPS"
    if unit.startswith("suffix:"):
        return 1.0, "ratio " + unit.split(":", 1)[1]
    return 1.0, "count" if unit == "short" else ""


def fmt(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return str(value)
    factor, label = unit_scale(unit, abs(value))
    scaled = value * factor
    text = f"{scaled:.3g}" if abs(scaled) < 1000 else f"{scaled:,.0f}"
    return f"{text} {label}".strip() if not label.startswith("ratio") else f"{text}×"


def threshold_color(value: float, steps: list[dict[str, Any]]) -> str:
    color = "green"
    for step in steps:
        if step.get("value") is None or value >= step["value"]:
            color = step["color"]
    return COLORS.get(color, color)


def legend(fmt_text: str, metric: dict[str, str]) -> str:
    if not fmt_text:
        return (
            ", ".join(f"{k}={v}" for k, v in sorted(metric.items()) if k != "__name__") or "value"
        )
    text = fmt_text
    for key, value in metric.items():
        text = text.replace("{{" + key + "}}", value)
    while "{{" in text:  # a label this series does not have: Grafana prints nothing
        start = text.index("{{")
        text = text[:start] + text[text.index("}}", start) + 2 :]
    return " ".join(text.split())


def series_of(panel: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (legend(t["legendFormat"], s["metric"]), s) for t in panel["targets"] for s in t["result"]
    ]


# --- panels -------------------------------------------------------------------------------


def no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, color="#777777")
    ax.set_xticks([])
    ax.set_yticks([])


def _figure_height(ax: Axes) -> float:
    """Height in inches of the figure `ax` is on (every axes here is added to one)."""
    figure = ax.get_figure(root=True)
    assert figure is not None
    return figure.get_figheight()


def draw_timeseries(ax: Axes, panel: dict[str, Any], narrow: bool = False) -> None:
    unit = panel["fieldConfig"].get("unit", "")
    found = series_of(panel)
    values = [float(v) for _, s in found for _, v in s["values"] if math.isfinite(float(v))]
    if not values:
        no_data(ax, "No data")
        return
    largest = max(abs(v) for v in values)
    factor, label = unit_scale(unit, largest)
    for index, (name, series) in enumerate(found):
        points = [(t, float(v)) for t, v in series["values"] if math.isfinite(float(v))]
        if not points:
            continue
        times = [dt.datetime.fromtimestamp(float(t), dt.UTC) for t, _ in points]
        ys = [v * factor for _, v in points]
        last, top = points[-1][1], max(v for _, v in points)
        calcs = f"last {fmt(last, unit)}" + ("" if narrow else f"   max {fmt(top, unit)}")
        # matplotlib plots datetimes through its units registry; its stubs take only numbers.
        ax.plot(
            times,  # type: ignore[arg-type]
            ys,
            color=PALETTE[index % len(PALETTE)],
            linewidth=1.4,
            label=f"{name}   {calcs}",
        )
    custom = panel["fieldConfig"].get("custom", {})
    if custom.get("thresholdsStyle", {}).get("mode", "off") != "off":
        for step in panel["fieldConfig"].get("thresholds", {}).get("steps", []):
            value = step.get("value")
            if value is not None and value <= 2 * largest:  # Grafana does not widen the axis
                ax.axhline(
                    value * factor,
                    color=COLORS.get(step["color"], step["color"]),
                    linestyle="--",
                    linewidth=1.1,
                )
    if panel["fieldConfig"].get("min") == 0:
        ax.set_ylim(bottom=0)
    soft_max = custom.get("axisSoftMax")
    if isinstance(soft_max, int | float):
        # Grafana's soft maximum: the axis reaches at least this far (more if the data does),
        # so a line at exactly the maximum (a full credit balance) is drawn inside the frame.
        top = max(float(soft_max), max(values)) * factor
        ax.set_ylim(top=top + 0.05 * (top - ax.get_ylim()[0]))
    ax.set_ylabel(label, fontsize=8)
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=4 if narrow else 8))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=dt.UTC))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    # Grafana's table legend on the right; the font shrinks so every line fits the panel.
    height_pt = ax.get_position().height * _figure_height(ax) * 72
    size = max(4.5, min(6.5, height_pt / (1.35 * max(1, len(found)))))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=size, frameon=False)


def draw_bargauge(ax: Axes, panel: dict[str, Any]) -> None:
    unit = panel["fieldConfig"].get("unit", "")
    steps = panel["fieldConfig"].get("thresholds", {}).get("steps", [])
    bars = [(name, float(s["values"][-1][1])) for name, s in series_of(panel)]
    if not bars:
        no_data(ax, "No data")
        return
    bars.sort()
    largest = max(v for _, v in bars)
    factor, label = unit_scale(unit, largest)
    positions = range(len(bars))
    ax.barh(
        positions,
        [v * factor for _, v in bars],
        height=0.6,
        color=[threshold_color(v, steps) for _, v in bars],
    )
    for index, (name, value) in enumerate(bars):
        # Grafana writes the name above the bar and the value at its end.
        ax.text(0, index - 0.38, name, va="bottom", fontsize=8)
        ax.text(
            value * factor, index, " " + fmt(value, unit), va="center", fontsize=9, weight="bold"
        )
    ax.set_yticks([])
    ax.set_ylim(len(bars) - 0.5, -0.9)
    for step in steps:
        if step.get("value") is not None:
            ax.axvline(step["value"] * factor, color=COLORS.get(step["color"]), linestyle=":")
    ax.set_xlim(0, max(largest, *(s["value"] or 0 for s in steps)) * factor * 1.3)
    ax.set_xlabel(label, fontsize=8)
    ax.tick_params(labelsize=7)


def draw_stat(ax: Axes, panel: dict[str, Any]) -> None:
    unit = panel["fieldConfig"].get("unit", "")
    steps = panel["fieldConfig"].get("thresholds", {}).get("steps", [])
    found = series_of(panel)
    if not found:
        no_data(ax, "No data")
        return
    value = float(found[0][1]["values"][-1][1])
    ax.set_facecolor(threshold_color(value, steps))
    text = f"{value:g}" if unit in ("none", "") else fmt(value, unit)
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=26, color="white", weight="bold")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_table(ax: Axes, panel: dict[str, Any]) -> None:
    unit = panel["fieldConfig"].get("unit", "")
    steps = panel["fieldConfig"].get("thresholds", {}).get("steps", [])
    rows = [s for _, s in series_of(panel)]
    ax.axis("off")
    if not rows:
        no_data(ax, "No data")
        return
    columns = sorted({k for s in rows for k in s["metric"] if k != "__name__"})
    rows.sort(key=lambda s: [s["metric"].get(c, "") for c in columns])
    cells, colors = [], []
    for series in rows:
        value = float(series["values"][-1][1])
        cells.append([series["metric"].get(c, "") for c in columns] + [fmt(value, unit)])
        tint = threshold_color(value, steps) if steps else "#ffffff"
        colors.append(["#ffffff"] * len(columns) + [tint])
    # Rows of ~0.17 in, shrunk when there are more than the panel can hold.
    height_in = ax.get_position().height * _figure_height(ax)
    fraction = min(1.0, (len(cells) + 1) * 0.17 / height_in)
    table = ax.table(
        cellText=cells,
        colLabels=[*columns, "Value"],
        cellColours=colors,
        bbox=Bbox.from_bounds(0, 1 - fraction, 1, fraction),
        cellLoc="left",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(min(7.5, 72 * height_in / (len(cells) + 1) * 0.75))


def draw_heatmap(ax: Axes, panel: dict[str, Any]) -> None:
    """Grafana's heatmap of `format: heatmap`: cumulative le buckets de-accumulated."""
    found = [s for _, s in series_of(panel)]
    if not found:
        no_data(ax, "No data")
        return
    bounds = sorted({float(s["metric"]["le"]) for s in found})
    times = sorted({float(t) for s in found for t, _ in s["values"]})
    cumulative = {
        (float(s["metric"]["le"]), float(t)): float(v) for s in found for t, v in s["values"]
    }
    grid = []
    for bound_index, bound in enumerate(bounds):
        below = bounds[bound_index - 1] if bound_index else None
        grid.append(
            [
                max(
                    0.0,
                    cumulative.get((bound, t), 0.0)
                    - (cumulative.get((below, t), 0.0) if below is not None else 0.0),
                )
                for t in times
            ]
        )
    image = ax.imshow(
        grid, aspect="auto", origin="lower", cmap="Oranges", norm=matplotlib.colors.PowerNorm(0.5)
    )
    labels = ["+Inf" if math.isinf(b) else f"{b * 1000:g}" for b in bounds]
    ax.set_yticks(range(len(bounds)), labels, fontsize=6)
    ax.set_ylabel("le (upper bound, ms)", fontsize=8)
    ax.set_xticks(
        range(len(times)),
        [dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M:%S") for t in times],
        fontsize=7,
    )
    colorbar = ax.figure.colorbar(image, ax=ax, pad=0.01)
    colorbar.set_label("fsyncs per interval", fontsize=7)
    colorbar.ax.tick_params(labelsize=6)


DRAW = {
    "timeseries": draw_timeseries,
    "bargauge": draw_bargauge,
    "stat": draw_stat,
    "table": draw_table,
    "heatmap": draw_heatmap,
}


def draw_dashboard(record: dict[str, Any], excused: dict[str, str], note: str) -> Figure:
    """One figure laid out like the dashboard's 24-column grid."""
    panels = record["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header = 2.0  # grid rows for the figure title
    total = height + header
    figure = plt.figure(figsize=(24 * COLUMN_IN, total * ROW_IN))
    variables = ", ".join(f"{k}={v}" for k, v in record["variables"].items() if k != "datasource")
    figure.suptitle(
        f"{record['title']}  (uid {record['uid']})",
        x=0.01,
        y=1 - 0.3 / total,
        ha="left",
        fontsize=15,
        weight="bold",
    )
    figure.text(
        0.01,
        1 - 1.2 / total,
        f"variables: {variables}\n{note}",
        fontsize=8.5,
        va="top",
        color="#555555",
    )
    for panel in panels:
        pos = panel["gridPos"]
        left, width = pos["x"] / 24, pos["w"] / 24
        top = 1 - (pos["y"] + header) / total
        if panel["type"] == "row":
            figure.text(
                left + 0.005,
                top - 0.5 / total,
                panel["title"],
                fontsize=12,
                weight="bold",
                va="center",
                color="#1F60C4",
            )
            continue
        narrow = pos["w"] <= 8
        pad_x = 0.045 if panel["type"] != "bargauge" else 0.015  # room for y tick labels
        legend_room = (0.5 if narrow else 0.42) if panel["type"] == "timeseries" else 0.0
        axes_width = (
            width - pad_x - 0.008
            if panel["type"] != "timeseries"
            else ((width - pad_x) * (1 - legend_room))
        )
        if panel["type"] in ("stat", "table"):
            pad_x = 0.01
            axes_width = width - 0.02
        box = (left + pad_x, top - (pos["h"] - 0.9) / total, axes_width, (pos["h"] - 1.9) / total)
        ax = figure.add_axes(box)
        ax.set_title(panel["title"], fontsize=10, loc="left", weight="bold")
        if panel["title"] in excused:
            no_data(
                ax,
                "No data in this environment (documented in\n"
                "dashboards/external-metrics.json):\n" + excused[panel["title"]],
            )
            continue
        if panel["type"] == "timeseries":
            draw_timeseries(ax, panel, narrow)
        else:
            DRAW[panel["type"]](ax, panel)
    return figure


def save_pictures(
    results: dict[str, Any], out: Path, note: str, excused: dict[str, dict[str, str]] | None = None
) -> list[Path]:
    """One PNG per dashboard (`<uid>.png`) in `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file, record in sorted(results["dashboards"].items()):
        figure = draw_dashboard(record, (excused or {}).get(file, {}), note)
        path = out / f"{record['uid']}.png"
        tmp = path.with_suffix(".png.tmp")
        figure.savefig(tmp, dpi=100, format="png")
        plt.close(figure)
        tmp.replace(path)  # a reader never sees half a picture
        written.append(path)
    return written
