"""Grafana's side of a dashboard without a Grafana: variables, intervals, repeats, queries.

Why: a dashboard is only as good as the data its queries return, and no Grafana server can
be assumed where fioprobe runs (the demo, CI). This evaluates each committed dashboard the
way Grafana does (template variables from label_values queries, $__interval and
$__rate_interval from the panel and the time range, repeated panels laid out as Grafana lays
them out) against a real Prometheus, and returns every panel's series. The live dashboard
test checks them; `preview.draw` turns them into pictures.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from fioprobe.errors import FioprobeError
from fioprobe.services import servers

#: The committed dashboards (generated from dashboards/*.libsonnet).
DASHBOARDS = Path(__file__).resolve().parents[3] / "dashboards" / "out"
#: Grafana's default maxDataPoints for a panel that sets none.
MAX_DATA_POINTS = 1000


class PreviewError(FioprobeError):
    """A dashboard or a Prometheus answer Grafana could not use either."""


def dashboards(directory: Path = DASHBOARDS) -> dict[str, dict[str, Any]]:
    """file name -> dashboard JSON."""
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested (collapsed) panels included, in layout order."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def api(prometheus: str, path: str, params: dict[str, Any] | list[tuple[str, str]]) -> Any:
    """GET a Prometheus HTTP API endpoint (`fioprobe.services.servers.prometheus_api`)."""
    return servers.prometheus_api(prometheus, path, params)


def require(condition: object, message: str) -> None:
    """A dashboard or a Prometheus answer Grafana could not use either."""
    if not condition:
        raise PreviewError(message)


_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<match>.+),\s*)?(?P<label>\w+)\s*\)\s*$")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")


def duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds, as Grafana writes its interval variables."""
    return f"{max(1, round(seconds * 1000))}ms"


def parse_duration(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text):
        total += float(number) * units[unit]
    require(total > 0, f"not a duration: {text!r}")
    return total


def substitute(text: str, values: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        require(name in values, f"variable ${name} has no value (in {text!r})")
        return values[name]

    return _VARIABLE.sub(replace, text)


def interval_variables(
    panel: dict[str, Any], start: float, end: float, scrape_interval_s: float
) -> dict[str, str]:
    """$__interval etc. as Grafana computes them for this panel and time range."""
    span = end - start
    minimum = parse_duration(panel["interval"]) if panel.get("interval") else scrape_interval_s
    interval = max(minimum, span / panel.get("maxDataPoints", MAX_DATA_POINTS))
    rate_interval = max(interval + scrape_interval_s, 4 * scrape_interval_s)
    return {
        "__interval": duration(interval),
        "__interval_ms": str(round(interval * 1000)),
        "__rate_interval": duration(rate_interval),
        "__range": duration(span),
        "__range_s": str(round(span)),
        "__range_ms": str(round(span * 1000)),
    }


def resolve_variables(
    dashboard: dict[str, Any], prometheus: str, start: float, end: float, prefer: dict[str, str]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Values for every template variable, in order, as Grafana would set them.

    A query variable's own query must return values; "All" (the default where offered)
    becomes the variable's allValue, otherwise the preferred value (which must be among
    the returned ones), the saved current value, or the first returned value.
    """
    values: dict[str, str] = {}
    options: dict[str, list[str]] = {}
    for variable in dashboard["templating"]["list"]:
        name, kind = variable["name"], variable["type"]
        current = (variable.get("current") or {}).get("value")
        if kind == "datasource":
            values[name] = "prometheus"
            continue
        if kind == "custom":
            choices = [c.split(" : ")[-1].strip() for c in variable["query"].split(",")]
            options[name] = choices
            values[name] = prefer.get(name, current if isinstance(current, str) else choices[0])
            require(values[name] in choices, f"{name}={values[name]!r} is not one of {choices}")
            continue
        if kind in ("interval", "constant", "textbox"):
            values[name] = prefer.get(name, current or variable["query"].split(",")[0])
            continue
        require(kind == "query", f"unhandled variable type {kind} of ${name}")
        query = variable["query"]
        query = query.get("query", "") if isinstance(query, dict) else query
        match = _LABEL_VALUES.match(substitute(query, values))
        if match is None:
            raise PreviewError(f"${name}: only label_values(...) queries are handled: {query!r}")
        params: list[tuple[str, str]] = [("start", f"{start:.3f}"), ("end", f"{end:.3f}")]
        if match["match"]:
            params.append(("match[]", match["match"]))
        found = api(prometheus, f"/api/v1/label/{match['label']}/values", params)
        options[name] = found
        require(found, f"{dashboard['uid']}: variable ${name} query {match.group(0)!r} is empty")
        if name in prefer:
            require(prefer[name] in found, f"${name}: {prefer[name]!r} not in {found}")
            values[name] = prefer[name]
        elif variable.get("includeAll") and current in (["$__all"], "$__all"):
            values[name] = variable.get("allValue") or "(" + "|".join(map(re.escape, found)) + ")"
        elif isinstance(current, str) and current in found:
            values[name] = current
        else:
            values[name] = found[0]
    return values, options


def run_target(
    prometheus: str, expr: str, instant: bool, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    """The series a panel target gets: an instant vector at `end` or a range matrix."""
    if instant:
        data = api(prometheus, "/api/v1/query", {"query": expr, "time": f"{end:.3f}"})
        return [{"metric": s["metric"], "values": [s["value"]]} for s in data["result"]]
    # Grafana aligns the range to the step; aligning on `end` keeps the newest point, which
    # matters when the step (a panel's min interval) is longer than the whole range.
    steps = max(1, math.ceil((end - start) / step))
    data = api(
        prometheus,
        "/api/v1/query_range",
        {"query": expr, "start": f"{end - steps * step:.3f}", "end": f"{end:.3f}", "step": step},
    )
    matrix: list[dict[str, Any]] = data["result"]
    return matrix


def finite_values(series: list[dict[str, Any]]) -> list[float]:
    return [
        float(v)
        for s in series
        for _, v in s["values"]
        if math.isfinite(float(v))  # NaN: a quantile of zero rate; not "data"
    ]


#: Grafana's grid width and a horizontal repeat's default maxPerRow.
GRID_COLUMNS = 24
DEFAULT_MAX_PER_ROW = 4


def grafana_regex_escape(value: str) -> str:
    """One value of a multi-value variable as Grafana's Prometheus data source writes it.

    Why: a repeated panel's copy sets its variable to one value, which Grafana escapes for a
    regex inside a PromQL string (prometheusSpecialRegexEscape), not to the "All" regex.
    """
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


def selected_values(
    variable: dict[str, Any], values: dict[str, str], options: dict[str, list[str]]
) -> list[str]:
    """The values a multi-value variable stands for: every option for "All", else its value."""
    name = variable["name"]
    if variable.get("includeAll") and values[name] == variable.get("allValue"):
        return list(options[name])
    return [values[name]]


def expand_repeats(
    dashboard: dict[str, Any], values: dict[str, str], options: dict[str, list[str]]
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Panels as Grafana shows them, each with the variable values its queries see.

    Why: a panel with `repeat` is shown once per selected value of its variable, with that
    single value substituted, laid out as Grafana's DashboardModel.repeatPanel does
    (horizontal copies max(24/n, 24/maxPerRow) wide, wrapping; vertical ones stacked), and
    the panels below move down by the extra lines the copies take.
    """
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    shown: list[tuple[dict[str, Any], dict[str, str]]] = []
    shift = 0
    for panel in panels(dashboard):
        panel = {**panel, "gridPos": {**panel["gridPos"], "y": panel["gridPos"]["y"] + shift}}
        name = panel.get("repeat")
        if not name:
            shown.append((panel, values))
            continue
        require(name in variables, f"{panel['title']!r} repeats for undefined ${name}")
        chosen = selected_values(variables[name], values, options)
        pos = panel["gridPos"]
        x, y = 0.0, pos["y"]
        for index, value in enumerate(chosen):
            copy = {**panel, "gridPos": dict(pos), "repeat_value": {name: value}}
            if panel.get("repeatDirection") == "v":
                copy["gridPos"]["y"] = pos["y"] + index * pos["h"]
            else:
                per_row = panel.get("maxPerRow") or DEFAULT_MAX_PER_ROW
                width = max(GRID_COLUMNS / len(chosen), GRID_COLUMNS / per_row)
                if x + width > GRID_COLUMNS:
                    x, y = 0.0, y + pos["h"]
                copy["gridPos"].update(x=x, y=y, w=width)
                x += width
            copy["title"] = substitute(panel["title"], {**values, name: value})
            shown.append((copy, {**values, name: grafana_regex_escape(value)}))
        last = shown[-1][0]["gridPos"]
        shift += last["y"] + last["h"] - (pos["y"] + pos["h"])
    return shown


def collect_results(
    prometheus: str,
    start: float,
    end: float,
    *,
    prefer: dict[str, str] | None = None,
    scrape_interval_s: float = 1.0,
    directory: Path = DASHBOARDS,
) -> dict[str, Any]:
    """Every variable and panel query of every dashboard, substituted and run.

    Returns a JSON-serialisable record (also what the pictures are drawn from).
    """
    out: dict[str, Any] = {"start": start, "end": end, "dashboards": {}}
    for file, dashboard in dashboards(directory).items():
        values, options = resolve_variables(dashboard, prometheus, start, end, prefer or {})
        record: dict[str, Any] = {
            "uid": dashboard["uid"],
            "title": dashboard["title"],
            "variables": values,
            "options": options,
            "panels": [],
        }
        for panel, scoped in expand_repeats(dashboard, values, options):
            entry: dict[str, Any] = {
                key: panel.get(key)
                for key in (
                    "id",
                    "type",
                    "title",
                    "gridPos",
                    "description",
                    "options",
                    "repeat_value",
                )
            }
            entry["fieldConfig"] = panel.get("fieldConfig", {}).get("defaults", {})
            entry["targets"] = []
            if panel["type"] != "row":
                intervals = interval_variables(panel, start, end, scrape_interval_s)
                step = parse_duration(intervals["__interval"])
                for target in panel.get("targets", []):
                    expr = substitute(target["expr"], {**scoped, **intervals})
                    instant = bool(target.get("instant")) and not target.get("range")
                    entry["targets"].append(
                        {
                            "refId": target.get("refId"),
                            "expr": expr,
                            "instant": instant,
                            "format": target.get("format"),
                            "legendFormat": target.get("legendFormat", ""),
                            "result": run_target(prometheus, expr, instant, start, end, step),
                        }
                    )
            record["panels"].append(entry)
        out["dashboards"][file] = record
    return out
