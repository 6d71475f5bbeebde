"""One watch request of the Kubernetes API: each event as it arrives, with the probe's clock.

Why the probe's clock: the provisioning probe times each step by when it learned the step was
done (time.monotonic() when the event's line arrived), not by the objects' timestamps, which
are whole seconds of other machines' clocks (`fioprobe.provision.cross_check`).

A watch starts at a resourceVersion (a list's, so nothing between the list and the watch is
missed) and asks for bookmarks, so the version it reached moves on even when nothing it
watches changes: the next watch, after the server ends this one at `seconds`, starts there.
An event the server sends as {"type": "ERROR", "object": <Status>} (410 Gone: the version is
too old) is delivered like any other; listing again is the caller's (it knows what to list).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import KubeBadAnswer
from fioprobe.kube.stream import Stream

#: How long the API server keeps one watch open (its `timeoutSeconds`); the caller watches
#: again from the version reached. Shorter than the API server's own limit (30-60 minutes).
WATCH_SECONDS = 300
#: How long past `timeoutSeconds` the probe waits for the server to end the watch before it
#: cuts it off itself (a server that forgot it, a proxy holding the connection).
GRACE_SECONDS = 30.0
#: The longest event line read. An object is a few KiB; a pod with many containers tens.
LINE_BYTES = 4 * 1024 * 1024
_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


@dataclass(frozen=True)
class Delivery:
    """A watch event ({"type": ..., "object": ...}) and `at`, time.monotonic() when its
    line arrived."""

    at: float
    event: dict[str, Any]


class Watch:
    """A watch of the list at `path` (e.g. /api/v1/namespaces/x/pods) from
    `resource_version`, narrowed by label and field selectors like a list.

    `deliveries()` opens it and yields each event until the server ends it; `close()`, from
    any thread, ends it at once. `resource_version` follows the events, ready for the next
    watch."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        *,
        what: str,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        seconds: int = WATCH_SECONDS,
        grace_seconds: float = GRACE_SECONDS,
        line_bytes: int = LINE_BYTES,
    ) -> None:
        self.client = client
        self.path = path
        self.what = what
        self.resource_version = resource_version
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.seconds = seconds
        self.grace_seconds = grace_seconds
        self.line_bytes = line_bytes
        self._stream: Stream | None = None
        self._closed = threading.Event()  # set by `close`, from any thread

    def deliveries(self) -> Iterator[Delivery]:
        """Open the watch and yield each event as it arrives; return when the server ends
        the answer (its timeout) or `close` was called. Raises a KubeError when the watch
        cannot be opened or an event cannot be read."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.seconds),
        }
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        if self.label_selector is not None:
            query["labelSelector"] = self.label_selector
        if self.field_selector is not None:
            query["fieldSelector"] = self.field_selector
        if self._closed.is_set():
            return
        stream = self.client.stream(
            self.path, what=self.what, query=query, seconds=self.seconds + self.grace_seconds
        )
        self._stream = stream
        try:
            if self._closed.is_set():  # closed while it was being opened
                return
            while line := stream.readline(self.line_bytes):
                at = time.monotonic()
                if not line.strip():
                    continue
                event = self._event(line)
                version = _version(event)
                if version:
                    self.resource_version = version
                yield Delivery(at, event)
        finally:
            stream.release()

    def close(self) -> None:
        """End the watch now; its reader returns without an error. Safe from any thread,
        before, during or after `deliveries`."""
        self._closed.set()
        if self._stream is not None:
            self._stream.close()

    def _event(self, line: bytes) -> dict[str, Any]:
        shown = f"{self.what} (watch of {self.path}): {self.client.server} sent"
        try:
            event: object = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise KubeBadAnswer(f"{shown} an event that is not JSON") from None
        if (
            not isinstance(event, dict)
            or event.get("type") not in _TYPES
            or not isinstance(event.get("object"), dict)
        ):
            raise KubeBadAnswer(f"{shown} an event that is not a watch event")
        return event


def _version(event: dict[str, Any]) -> str:
    """The resourceVersion an event brings the watch to (none for an ERROR)."""
    if event["type"] == "ERROR":
        return ""
    metadata = event["object"].get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) and 0 < len(version) <= 256 else ""
