"""Kubernetes timestamps, with how precise each one is.

Most times in the API are `metav1.Time`: RFC 3339 in whole seconds, the fraction cut off
when written (creationTimestamp, a condition's lastTransitionTime, a container's startedAt,
an event's firstTimestamp). Events written through the newer events API carry `eventTime`,
a `metav1.MicroTime` with six decimals. A time is kept with its resolution, so that a
comparison with the probe's own clock allows exactly the rounding the field has, no more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from fioprobe.provision.shape import ShapeError

_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", re.ASCII
)


@dataclass(frozen=True)
class KubeTime:
    """A time the API wrote: seconds since the epoch, and how much of a second was cut off
    (1.0 for whole seconds: the true instant lies in [posix, posix + resolution))."""

    posix: float
    resolution: float


def parse_time(value: object, where: str) -> KubeTime | None:
    """The time `value` (an RFC 3339 string, as the API writes it), None when unset."""
    if value is None or value == "":
        return None
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ShapeError(f"{where} is not an RFC 3339 time: {str(value)[:40]!r}")
    seconds, fraction, zone = match.groups()
    try:
        whole = datetime.fromisoformat(seconds + ("+00:00" if zone == "Z" else zone))
    except ValueError as error:
        raise ShapeError(f"{where} is not a valid time: {value!r}") from error
    if fraction is None:
        return KubeTime(whole.timestamp(), 1.0)
    return KubeTime(whole.timestamp() + int(fraction) / 10 ** len(fraction), 10.0 ** -len(fraction))
