"""One change a watch delivered, with the probe's clock at delivery: what the timeline eats.

A watch event is {"type": ADDED | MODIFIED | DELETED | BOOKMARK | ERROR, "object": ...}. The
first three carry an object's state (DELETED its last one); a BOOKMARK carries only a
resourceVersion and is no observation; an ERROR carries a Status (most often 410 Gone: the
watch fell too far behind), after which the caller lists again and watches anew.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fioprobe.errors import FioprobeError
from fioprobe.provision.attach import AttachmentState, read_attachment
from fioprobe.provision.objects import (
    WRITER,
    ClaimState,
    PodState,
    VolumeState,
    read_claim,
    read_pod,
    read_volume,
)
from fioprobe.provision.shape import ShapeError, mapping, message, required_text, text

State = ClaimState | PodState | VolumeState | AttachmentState


class Change(enum.StrEnum):
    """A watch event's type, for the events that carry a state."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True)
class Observation:
    """`state` as the watch delivered it at `at`, the probe's time.monotonic() when it
    arrived (not when the change happened: that is the object's business, and only a
    cross-check)."""

    at: float
    change: Change
    state: State

    @property
    def gone(self) -> bool:
        return self.change is Change.DELETED


class WatchFailed(FioprobeError):
    """The watch ended with an ERROR event; the caller lists again and watches anew."""


def read_watch_event(
    at: float, event: Mapping[str, Any], writer: str = WRITER
) -> Observation | None:
    """The observation of one watch event of a claim, pod, volume or VolumeAttachment, or
    None for a BOOKMARK. Raises WatchFailed for an ERROR event."""
    kind = required_text(event, "type")
    obj = mapping(event, "object")
    if kind == "BOOKMARK":
        return None
    if kind == "ERROR":
        raise WatchFailed(
            f"the watch ended: {text(obj, 'reason') or 'error'} "
            f"({message(text(obj, 'message'), 200)})"
        )
    try:
        change = Change(kind)
    except ValueError:
        raise ShapeError(f"a watch event of type {kind!r:.40}") from None
    object_kind = required_text(obj, "kind")
    state: State
    if object_kind == "PersistentVolumeClaim":
        state = read_claim(obj)
    elif object_kind == "Pod":
        state = read_pod(obj, writer)
    elif object_kind == "PersistentVolume":
        state = read_volume(obj)
    elif object_kind == "VolumeAttachment":
        state = read_attachment(obj)
    else:
        raise ShapeError(f"a watch event of a {object_kind!r:.60}, which no step follows")
    return Observation(at, change, state)
