"""The Prometheus text format (version 0.0.4) of fioprobe's own collector, written lean.

`fioprobe convert` of a large json+ file (64 jobs) prints about 1,100 per-job series.
prometheus_client's `generate_latest` checks and escapes the metric name and every label
name of each sample again (UTF-8 name support), which made the text exposition cost as
much as decoding the JSON. fioprobe's names come from its metric table and the fixed
grouping labels, so this writer checks each name once per family and escapes only label
values and help texts. For every family `ProbeCollector` yields, its output is byte for
byte that of `generate_latest` (tests/metrics/test_exposition.py compares the two over the whole
fio corpus and over hostile label values); anything else it refuses rather than guess.

Pushes still go through `prometheus_client.push_to_gateway`.
"""

from __future__ import annotations

import re

from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["text_exposition"]

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*")  # "__" names are Prometheus's
_MINUS_INF = float("-inf")
#: Family types this writer renders; generate_latest writes each as its own TYPE line.
_TYPES = frozenset({"counter", "gauge", "histogram", "summary"})


def text_exposition(collector: Collector) -> bytes:
    """The text format of everything `collector` yields (as `generate_latest` writes it)."""
    output: list[str] = []
    append = output.append
    for family in collector.collect():
        kind = family.type
        if kind not in _TYPES:
            raise ValueError(f"{family.name}: family type {kind!r} is not supported")
        name = family.name + "_total" if kind == "counter" else family.name
        _check(_METRIC_NAME, name)
        help_text = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        checked_names: set[str] = set()
        #: label names in the order of a sample's dict -> the same names sorted; and
        #: label -> value -> 'label="escaped value"'. Samples of one family repeat both.
        sorted_names: dict[tuple[str, ...], list[str]] = {}
        pair_text: dict[str, dict[str, str]] = {}
        for sample in family.samples:
            if sample.name not in checked_names:
                _check(_METRIC_NAME, sample.name)
                if sample.name in _openmetrics_only(family.name):
                    # generate_latest moves these into a gauge family of their own.
                    raise ValueError(f"{sample.name}: OpenMetrics-only samples are not supported")
                checked_names.add(sample.name)
            labels = sample.labels
            if labels:
                names = tuple(labels)
                order = sorted_names.get(names)
                if order is None:
                    order = sorted_names[names] = sorted(names)
                    for label in order:
                        if label not in pair_text:
                            _check(_LABEL_NAME, label)
                            pair_text[label] = {}
                pairs = []
                for label in order:
                    value = labels[label]
                    pair = pair_text[label].get(value)
                    if pair is None:
                        pair = pair_text[label][value] = f'{label}="{_escape(value)}"'
                    pairs.append(pair)
                series = f"{sample.name}{{{','.join(pairs)}}}"
            else:
                series = sample.name
            value_text = _number(sample.value)
            if sample.timestamp is not None:
                milliseconds = int(float(sample.timestamp) * 1000)
                append(f"{series} {value_text} {milliseconds:d}\n")
            else:
                append(f"{series} {value_text}\n")
    return "".join(output).encode("utf-8")


def _escape(value: str) -> str:
    """A label value may hold anything; the text format escapes only these three."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
    """`floatToGoString`, with a shortcut for the common case.

    Python's repr and Go's formatting agree on finite floats below 1e6; from there Go
    switches to exponent notation, which `floatToGoString` reproduces (as it does +Inf, NaN).
    """
    if type(value) is float and _MINUS_INF < value < 1e6:
        return repr(value)
    text: str = floatToGoString(value)
    return text


def _openmetrics_only(name: str) -> tuple[str, ...]:
    return (f"{name}_created", f"{name}_gsum", f"{name}_gcount")


def _check(pattern: re.Pattern[str], name: str) -> None:
    """Refuse a name generate_latest would have to escape: the output would differ."""
    if pattern.fullmatch(name) is None:
        raise ValueError(f"{name!r} is not a plain Prometheus name")
