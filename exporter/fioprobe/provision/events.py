"""Kubernetes Events (core/v1) about the run's objects: the components' own words for what
went wrong (the provisioner's ProvisioningFailed, the scheduler's FailedScheduling, the
attach/detach controller's FailedAttachVolume, the kubelet's FailedMount).

Two generations of recorders write them. The older one (the kubelet, the attach/detach and
volume controllers) fills firstTimestamp, lastTimestamp and count, in whole seconds; the
newer events API (the scheduler) fills eventTime in microseconds and, for a repeat, series,
leaving the old fields null. Both are read; the first and latest occurrence come from
whichever is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fioprobe.provision.shape import integer, mapping, message, required_text, text
from fioprobe.provision.timestamps import KubeTime, parse_time


@dataclass(frozen=True)
class InvolvedObject:
    kind: str
    namespace: str | None
    name: str
    uid: str | None


@dataclass(frozen=True)
class Event:
    #: Normal or Warning.
    type: str
    #: The machine-readable reason (ProvisioningFailed, FailedAttachVolume...).
    reason: str
    message: str
    involved: InvolvedObject
    #: reportingComponent, or source.component of the older recorder.
    component: str
    first: KubeTime | None
    last: KubeTime | None
    count: int

    @property
    def warning(self) -> bool:
        return self.type == "Warning"


def read_event(obj: Mapping[str, Any]) -> Event:
    name = required_text(mapping(obj, "metadata"), "name", "metadata")
    where = f"Event {name}"
    involved = mapping(obj, "involvedObject")
    series = mapping(obj, "series")
    first = parse_time(obj.get("eventTime"), f"{where}: eventTime") or parse_time(
        obj.get("firstTimestamp"), f"{where}: firstTimestamp"
    )
    last = parse_time(
        series.get("lastObservedTime"), f"{where}: series.lastObservedTime"
    ) or parse_time(obj.get("lastTimestamp"), f"{where}: lastTimestamp")
    return Event(
        type=text(obj, "type", where) or "Normal",
        reason=text(obj, "reason", where) or "",
        message=message(text(obj, "message", where)),
        involved=InvolvedObject(
            kind=required_text(involved, "kind", f"{where}: involvedObject"),
            namespace=text(involved, "namespace"),
            name=required_text(involved, "name", f"{where}: involvedObject"),
            uid=text(involved, "uid"),
        ),
        component=text(obj, "reportingComponent")
        or text(mapping(obj, "source"), "component")
        or "",
        first=first,
        last=last or first,
        count=integer(series, "count") or integer(obj, "count") or 1,
    )
