"""The Pushgateway's API as fioprobe uses it: push a group, delete a group, list the groups.

What a request is (a PUT of the job's group, a DELETE, a GET of /api/v1/metrics) is the
Pushgateway's contract, not the transport's: `fioprobe.gateway.transport` carries requests to
any URL, this module says which ones a Pushgateway answers and checks that an answer is
outlined as a Pushgateway's. What the groups hold is `fioprobe.gateway.readback`'s.
"""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, push_to_gateway, pushadd_to_gateway
from prometheus_client.exposition import delete_from_gateway

from fioprobe.gateway.transport import Transport
from fioprobe.grouping import JOB
from fioprobe.text import printable

METRICS_API = "/api/v1/metrics"

#: The most fioprobe reads of a /api/v1/metrics answer. The answer holds every group of the
#: Pushgateway (a few kB each); anything larger is not an answer fioprobe should trust, and
#: reading it without a bound would let one server exhaust the probe's memory.
READ_BACK_LIMIT_BYTES = 64 * 1024 * 1024


def push(
    transport: Transport,
    grouping_key: dict[str, str],
    registry: CollectorRegistry,
    *,
    replace: bool = True,
    job: str = JOB,
) -> None:
    """PUT the registry's families as the whole group (replacing its previous push), or,
    with `replace=False`, POST them: only the metrics of the same names are replaced, the
    rest of the group (its counters) stays as it is. The group is `job`'s (the fio probes'
    by default)."""
    send = push_to_gateway if replace else pushadd_to_gateway
    transport.retrying(
        "push",
        lambda: send(
            transport.url,
            job=job,
            registry=registry,
            grouping_key=grouping_key,
            timeout=transport.timeout_seconds,
            handler=transport.handler,
        ),
    )


def delete_group(transport: Transport, grouping_key: dict[str, str], *, job: str = JOB) -> None:
    """DELETE the group: the Pushgateway forgets it and Prometheus stops seeing it."""
    transport.retrying(
        "delete",
        lambda: delete_from_gateway(
            transport.url,
            job=job,
            grouping_key=grouping_key,
            timeout=transport.timeout_seconds,
            handler=transport.handler,
        ),
    )


class Shape(Exception):
    """The answer is not shaped as a Pushgateway's: something else answered.

    Raised for the answer's outline here and for a group's families in `readback`; the
    caller turns it into the PushError that names the answer."""


def list_groups(transport: Transport) -> list[dict[str, object]]:
    """Every group the Pushgateway holds, as its /api/v1/metrics JSON entries.

    The answer's outline is checked (a list of objects, each with labels that map strings to
    strings); the families inside a group are checked by whoever reads them
    (`readback.read_group`).
    """
    answer = transport.retrying(
        "read back", lambda: transport.get(METRICS_API, READ_BACK_LIMIT_BYTES)
    )
    where = f"{transport.shown_url}{METRICS_API}"
    try:
        try:
            data = json.loads(answer.body.decode("utf-8"))  # never json's UTF-16/32 guess
        except RecursionError:
            raise Shape("its JSON is nested too deeply") from None
        except ValueError as exc:
            kind = printable(answer.content_type, 60) or "no content type"
            raise Shape(f"not JSON ({kind}): {printable(str(exc), 120)}") from None
        return _groups(data)
    except Shape as exc:
        raise transport.error(f"read back: {where} is not a Pushgateway answer: {exc}") from None


def _groups(data: object) -> list[dict[str, object]]:
    if not isinstance(data, dict):
        raise Shape("the answer is not a JSON object")
    status = data.get("status", "success")
    if status != "success":
        raise Shape(f"status is {show(status)}, not 'success'")
    groups = data.get("data")
    if not isinstance(groups, list):
        raise Shape("'data' is not a list")
    for index, group in enumerate(groups):
        if not isinstance(group, dict):
            raise Shape(f"group {index} is not an object")
        if not string_map(group.get("labels")):
            raise Shape(f"group {index}: its labels are not a map of strings")
    return groups


def string_map(value: object) -> bool:
    """Whether `value` is a JSON object of strings, as the Pushgateway writes labels."""
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    )


def show(value: object, limit: int = 40) -> str:
    """A value from the answer, short and on one line, for a message."""
    return printable(repr(value), limit)
