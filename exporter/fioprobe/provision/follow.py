"""The watches one provisioning run follows, each in a thread, delivering into one queue.

A run watches its claims and pods and the events of its namespace (narrowed by the run's
label where the API can), and, cluster-wide, PersistentVolumes and VolumeAttachments (which
no label of the probe's names: the provisioner and the attach/detach controller make them).
Each watch starts at the version of a list read before the run's first create, so no change
of the run's objects can fall between list and watch. When the server ends a watch (its
timeout), the thread watches again from the version reached; when it answers 410 Gone (the
version is too old), it lists again and delivers the list's objects as `ADDED` (the
timeline takes a state it has seen again as no change). A watch that cannot be read is
retried, 1 s apart, until the run is over: the run's deadlines bound it, not the watch.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fioprobe.kube.client import METADATA_LIST, KubeClient
from fioprobe.kube.errors import KubeBadAnswer, KubeError
from fioprobe.kube.watch import Delivery, Watch

#: The pause before a watch that failed is opened again.
RETRY_SECONDS = 1.0


@dataclass(frozen=True)
class Source:
    """One list to follow: its path, the kind its items are (a list's items carry no kind),
    its label selector, and whether the objects already there are delivered first (the
    run's own, in case of a re-list) or only the version read (cluster-wide lists, whose
    objects from before the run cannot be the run's: one small page instead of all)."""

    path: str
    kind: str
    label_selector: str | None = None
    existing: bool = True


@dataclass(frozen=True)
class Trouble:
    """A watch that failed (it is retried): for the run's log and its notes."""

    at: float
    source: Source
    message: str


class Follower:
    """Follows `sources` from the versions read by `start`; `deliveries` holds each event
    (a `Delivery`) and each failed attempt (a `Trouble`) in arrival order."""

    def __init__(self, client: KubeClient, sources: Sequence[Source]) -> None:
        self.client = client
        self.sources = tuple(sources)
        self.deliveries: queue.Queue[Delivery | Trouble] = queue.Queue()
        self._stop = threading.Event()
        self._watches: dict[Source, Watch] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """List each source (for its version, its objects delivered as ADDED), then watch
        each in a thread. Raises the KubeError of a list: a run that cannot see its objects
        must not create them."""
        versions = [self._list(source) for source in self.sources]
        for source, version in zip(self.sources, versions, strict=True):
            thread = threading.Thread(
                target=self._follow, args=(source, version), daemon=True,
                name=f"fioprobe-watch-{source.kind}",
            )  # fmt: skip
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End every watch and wait (at most `timeout`) for the threads."""
        self._stop.set()
        with self._lock:
            for watch in self._watches.values():
                watch.close()
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))

    def _list(self, source: Source) -> str:
        if not source.existing:
            return self._version(source)
        objects, version = self.client.list_objects(
            source.path, what=f"listing {source.kind}s", label_selector=source.label_selector
        )
        at = time.monotonic()
        for obj in objects:
            self.deliveries.put(Delivery(at, {"type": "ADDED", "object": _kinded(obj, source)}))
        return version

    def _version(self, source: Source) -> str:
        """The list's current resourceVersion, from a page of one object's metadata."""
        answer = self.client.get(
            source.path, what=f"reading the version of the {source.kind}s",
            query={"limit": "1"}, accept=METADATA_LIST,
        )  # fmt: skip
        metadata = answer.get("metadata")
        version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if not isinstance(version, str) or not version:
            raise KubeBadAnswer(
                f"reading the version of the {source.kind}s (GET {source.path}): the list "
                "has no resourceVersion"
            )
        return version

    def _follow(self, source: Source, version: str) -> None:
        for _ in range(1_000_000):  # bounded; a run ends long before (its deadlines)
            if self._stop.is_set():
                return
            watch = Watch(self.client, source.path, what=f"watching {source.kind}s",
                          resource_version=version,
                          label_selector=source.label_selector)  # fmt: skip
            with self._lock:
                if self._stop.is_set():
                    return
                self._watches[source] = watch
            try:
                gone = False
                for delivery in watch.deliveries():
                    if _gone(delivery.event):
                        gone = True
                        break
                    self.deliveries.put(delivery)
                version = watch.resource_version
                if gone:
                    version = self._list(source)
            except KubeError as exc:
                if self._stop.is_set():
                    return
                self.deliveries.put(Trouble(time.monotonic(), source, str(exc)))
                self._stop.wait(RETRY_SECONDS)
                version = watch.resource_version


def _gone(event: dict[str, Any]) -> bool:
    """An ERROR event saying the watch's version is too old (410 Gone, reason Expired)."""
    if event.get("type") != "ERROR":
        return False
    status = event["object"]
    return status.get("code") == 410 or status.get("reason") in ("Expired", "Gone")


def _kinded(obj: dict[str, Any], source: Source) -> dict[str, Any]:
    """A list's item with its kind: lists leave it out of their items, watches do not."""
    return obj if obj.get("kind") else {**obj, "kind": source.kind}
