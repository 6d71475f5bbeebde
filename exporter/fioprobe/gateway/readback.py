"""Reading a group back from the Pushgateway, reduced to what fioprobe can trust.

What is read back feeds cumulative counters that must never go backwards and never carry
garbage, and decides who owns a group (its writer, its push identities). So every value kept
is checked for what its metric promises (see `read_group`); this is where a Pushgateway
answer becomes fioprobe's totals again, apart from how it was fetched
(`fioprobe.gateway.api`, `fioprobe.gateway.transport`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fioprobe.gateway.api import METRICS_API, Shape, list_groups, show, string_map
from fioprobe.gateway.transport import Transport
from fioprobe.metrics.histogram import le_label
from fioprobe.metrics.totals import (
    COUNT_LIMIT,
    PROBE_SCHEMA,
    GroupSchema,
    GroupTotals,
    HistogramRow,
    HistogramTotals,
)

#: The counters of a fio probe's group that are read back (gc judges a group by them too).
COUNTERS = tuple(name for _, name in PROBE_SCHEMA.counters)
LAST_SUCCESS = PROBE_SCHEMA.last_success
#: The bookkeeping every kind of group carries under the same names (fioprobe.metrics.table).
WRITER_INFO = "fioprobe_writer_info"
PUSH_IDS = ("fioprobe_push_id", "fioprobe_push_basis_id")
PUSH_TIME = "push_time_seconds"


@dataclass(frozen=True, slots=True)
class ReadBack:
    """One group as the Pushgateway holds it, reduced to what fioprobe can trust."""

    #: What can be trusted; histograms with another layout are dropped.
    totals: GroupTotals
    #: The group's push_time_seconds (the gateway's clock), if present.
    push_time: float | None
    #: Label "writer" of fioprobe_writer_info, if present.
    writer: str | None
    #: fioprobe_push_id and fioprobe_push_basis_id, if present and whole numbers.
    push_id: int | None
    basis_id: int | None
    #: Human-readable notes of what was not trusted and why.
    dropped: tuple[str, ...]


def read_group(
    transport: Transport, grouping_key: dict[str, str], schema: GroupSchema = PROBE_SCHEMA
) -> ReadBack | None:
    """This group as last pushed, or None if the Pushgateway has no such group.

    The group is the one whose labels are exactly {"job": schema.job, **grouping_key}, and
    what is read is what `schema` names.
    What is kept must be something fioprobe could have pushed: counters are finite whole
    numbers from 0 up to (not including) 2**53, a latency histogram has exactly the
    contract's bucket bounds (compared as numbers), whole non-decreasing cumulative counts, a
    +Inf bucket equal to its count and a finite sum of at least 0. A counter that fails is
    counted from 0 again and a histogram that fails is dropped (its series start again from
    0: a counter reset, which rate() handles), each with a note in `dropped`; a value that
    is corrupt could never be removed from the totals again, a reset heals at once.
    An answer that is not shaped as a Pushgateway's is a PushError.
    """
    wanted = {"job": schema.job, **grouping_key}
    for group in list_groups(transport):
        if group["labels"] == wanted:
            try:
                read_back = _read_back(group, schema)
            except Shape as exc:
                raise transport.error(
                    f"read back: {transport.shown_url}{METRICS_API} is not a Pushgateway "
                    f"answer: group {show(wanted, 200)}: {exc}"
                ) from None
            notes = tuple(transport.scrub(note) for note in read_back.dropped)
            return ReadBack(
                read_back.totals,
                read_back.push_time,
                read_back.writer,
                read_back.push_id,
                read_back.basis_id,
                notes,
            )
    return None


def read_totals(
    transport: Transport, grouping_key: dict[str, str], schema: GroupSchema = PROBE_SCHEMA
) -> GroupTotals | None:
    """The trusted cumulative totals of this group, or None if the group is absent."""
    read_back = read_group(transport, grouping_key, schema)
    return None if read_back is None else read_back.totals


def _read_back(group: dict[str, object], schema: GroupSchema) -> ReadBack:
    notes: list[str] = []
    totals = GroupTotals(last_success_timestamp=_timestamp(group, schema.last_success, notes))
    for key, name in schema.counters:
        totals.set_count(key, _counter(group, name, notes))
    for row in schema.histograms:
        histogram = _histogram(group, row, schema.bounds, notes)
        if histogram is not None:
            totals.histograms[row.key] = histogram
    push_time = _timestamp(group, PUSH_TIME, notes)
    writer = None
    writer_metric = _single(group, WRITER_INFO, notes)
    if writer_metric is not None:
        labels = writer_metric.get("labels", {})
        assert isinstance(labels, dict)  # `_single` checked: a map of strings
        writer = labels.get("writer")
    push_id, basis_id = (_identity(group, name, notes) for name in PUSH_IDS)
    return ReadBack(totals, push_time, writer, push_id, basis_id, tuple(notes))


def _identity(group: dict[str, object], name: str, notes: list[str]) -> int | None:
    """A push identity: a whole number from 1 below 2**53 (0 and anything else: none)."""
    metric = _single(group, name, notes)
    if metric is None or "value" not in metric:
        return None
    value = _number(metric["value"], f"{name}: value")
    if _count_problem(value) is not None or value == 0:
        return None
    return int(value)


def _single(
    group: dict[str, object],
    name: str,
    notes: list[str],
    labels: tuple[tuple[str, str], ...] = (),
) -> dict[str, object] | None:
    """The one series of family `name` (of those that carry `labels`), None when absent
    (noted when there are several)."""
    family = group.get(name)
    if family is None:
        return None
    if not isinstance(family, dict):
        raise Shape(f"{name} is not an object")
    metrics = family.get("metrics")
    if not isinstance(metrics, list):
        raise Shape(f"{name}: 'metrics' is not a list")
    for index, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            raise Shape(f"{name}: metric {index} is not an object")
        if not string_map(metric.get("labels", {})):
            raise Shape(f"{name}: metric {index}: its labels are not a map of strings")
    if labels:
        metrics = [m for m in metrics if all(m.get("labels", {}).get(k) == v for k, v in labels)]
    if len(metrics) != 1:
        if metrics:
            shown = "".join(f" {k}={v!r}" for k, v in labels)
            notes.append(
                f"{name}{shown}: {len(metrics)} series where fioprobe pushes one; not used"
            )
        return None
    only: dict[str, object] = metrics[0]
    return only


def _counter(group: dict[str, object], name: str, notes: list[str]) -> int:
    metric = _single(group, name, notes)
    if metric is None:
        return 0
    if "value" not in metric:
        notes.append(f"{name}: no value; counted from 0")
        return 0
    value = _number(metric["value"], f"{name}: value")
    problem = _count_problem(value)
    if problem:
        notes.append(f"{name}: {show(metric['value'])} {problem}; counted from 0")
        return 0
    return int(value)


def _count_problem(value: float) -> str | None:
    """Why `value` is not a count fioprobe could have pushed, or None if it is one."""
    if not math.isfinite(value):
        return "is not finite"
    if value < 0:
        return "is negative"
    if not value.is_integer():
        return "is not a whole number"
    if value >= COUNT_LIMIT:
        return "is 2**53 or more, beyond exact counting"
    return None


def _timestamp(group: dict[str, object], name: str, notes: list[str]) -> float | None:
    metric = _single(group, name, notes)
    if metric is None or "value" not in metric:
        return None
    value = _number(metric["value"], f"{name}: value")
    if not math.isfinite(value) or value <= 0:
        notes.append(f"{name}: {show(metric['value'])} is not a time; not used")
        return None
    return value


def _histogram(
    group: dict[str, object], row: HistogramRow, bounds: tuple[float, ...], notes: list[str]
) -> HistogramTotals | None:
    metric = _single(group, row.name, notes, row.labels)
    if metric is None:
        return None
    problem = _histogram_problem(group, row.name, metric, bounds)
    if isinstance(problem, str):
        shown = "".join(f" {k}={v!r}" for k, v in row.labels)
        notes.append(f"{row.name}{shown}: {problem}; dropped, its series start again from 0")
        return None
    return problem


def _histogram_problem(
    group: dict[str, object], name: str, metric: dict[str, object], bounds_wanted: tuple[float, ...]
) -> HistogramTotals | str:
    """The histogram's totals, or why they cannot be trusted (`bounds_wanted`: the kind's
    bucket bounds, +Inf included)."""
    count_wanted = len(bounds_wanted)
    family = group[name]
    assert isinstance(family, dict)  # `_single` checked: an object
    kind = family.get("type", "HISTOGRAM")
    if kind != "HISTOGRAM":
        return f"type is {show(kind)}, not HISTOGRAM"
    buckets = metric.get("buckets")
    if buckets is None:
        return "no buckets"
    if not isinstance(buckets, dict):
        raise Shape(f"{name}: 'buckets' is not an object")
    bounds = sorted(
        (_number(key, f"{name}: bucket bound"), _number(raw, f"{name}: bucket {show(key)}"))
        for key, raw in buckets.items()
    )
    found = [bound for bound, _ in bounds]
    if len(found) != count_wanted or set(found) != set(bounds_wanted):
        shown = ", ".join(map(le_label, found[:8])) + (", ..." if len(found) > 8 else "")
        return (
            f"bucket bounds are not fioprobe's {count_wanted} (found {len(found)}: "
            f"{shown or 'none'})"
        )
    cumulative = []
    previous = 0
    for bound, value in bounds:
        problem = _count_problem(value)
        if problem:
            return f"bucket le={le_label(bound)} count {value:g} {problem}"
        if value < previous:
            return f"cumulative count falls from {previous} to {value:g} at le={le_label(bound)}"
        previous = int(value)
        cumulative.append(previous)
    if "count" in metric:
        count = _number(metric["count"], f"{name}: count")
        if count != cumulative[-1]:
            return f"+Inf bucket {cumulative[-1]} differs from count {count:g}"
    if "sum" not in metric:
        return "no sum"
    total = _number(metric["sum"], f"{name}: sum")
    if not math.isfinite(total) or total < 0:
        return f"sum {total:g} is not a finite number of seconds of at least 0"
    counts = [cumulative[0]] + [
        cumulative[index] - cumulative[index - 1] for index in range(1, count_wanted)
    ]
    return HistogramTotals(counts, total)


#: How the Pushgateway writes a number (Go's strconv formatting): no spaces, underscores or
#: spelled-out names that float() would also accept.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN")


def _number(text: object, what: str) -> float:
    if not isinstance(text, str) or len(text) > 64 or not _NUMBER.fullmatch(text):
        raise Shape(f"{what} is not a number in a string: {show(text)}")
    return float(text)
