"""PromQL for the tests: the metric names an expression reads, and the numbers a real
Prometheus answers to an instant query.

Both have one home here: the mixin's and the dashboards' checks read names out of the
expressions they ship, and every test with a real Prometheus asks it for values.
`services.query` gives the raw result vector (and raises ServiceError on an API error, after
its own timeout); the functions below give its numbers, through it.
"""

from __future__ import annotations

import re

from support import services

# --- Metric names -------------------------------------------------------------------------

#: Grafana's references to a dashboard variable: $x, ${x}, ${x:fmt}, [[x]].
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")

_PROMQL_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "atan2", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (Grafana variables allowed in it).

    A small tokenizer, enough for the dashboards' queries: strings, label matchers, range
    and offset durations, and label lists of by/without/on/ignoring/group_* are removed;
    what remains as an identifier not followed by `(` (a function or aggregation) and not a
    keyword is a metric name.
    """
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = VARIABLE_REF.sub("1", s)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\boffset\s+-?[\w.]+", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"(?<![\w:])\d[\d.]*(?:[eE][+-]?\d+)?", " ", s)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][\w:]*", s):
        if s[match.end() :].lstrip().startswith("(") or match.group(0) in _PROMQL_KEYWORDS:
            continue
        names.add(match.group(0))
    return names


#: String literals (label values, template format strings) are not metric names.
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
#: PromQL identifiers: metric names, recording-rule names (with colons), functions, labels.
_IDENTIFIER = re.compile(r"(?<![\w:])[a-zA-Z_:][a-zA-Z0-9_:]*")


def referenced_names(promql: str) -> tuple[set[str], set[str]]:
    """(fioprobe_* series names, recording-rule names) that a PromQL text refers to.

    Every identifier outside a string counts, so a label name with the fioprobe_ prefix
    counts as a series (the mixin's rules use none; tests/mixin/test_mixin_metric_names.py
    pins that limit).
    """
    code = _STRINGS.sub('""', promql)
    names = set(_IDENTIFIER.findall(code))
    series = {n for n in names if n.startswith("fioprobe_") and ":" not in n}
    records = {n for n in names if ":" in n}
    return series, records


# --- Values of an instant query -----------------------------------------------------------


def instant_values(prometheus: str, expr: str, at: float | None = None) -> list[float]:
    """Every series' value, in the order Prometheus answered (NaN included)."""
    return [float(s["value"][1]) for s in services.query(prometheus, expr, at)]


def first_value(prometheus: str, expr: str, at: float | None = None) -> float | None:
    """The first series' value, or None when the result is empty."""
    result = services.query(prometheus, expr, at)
    return float(result[0]["value"][1]) if result else None


def single_value(prometheus: str, expr: str, at: float | None = None) -> float:
    """The value of the one series the query must give (AssertionError otherwise)."""
    result = services.query(prometheus, expr, at)
    assert len(result) == 1, (expr, result)
    return float(result[0]["value"][1])


def values_by_label(
    prometheus: str, expr: str, label: str, at: float | None = None
) -> dict[str, float]:
    """{the series' `label`: its value}, e.g. a histogram's buckets by `le`."""
    return {s["metric"][label]: float(s["value"][1]) for s in services.query(prometheus, expr, at)}
