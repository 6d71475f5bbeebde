"""What one target's stream has measured, kept by the parent from its writer's events.

Everything here is in memory of the serving process: the stream is scraped, so its counters
are ordinary process counters (a restart is a counter reset that rate() handles), and the
age of an operation still outstanding is computed when Prometheus asks, from the time the
writer said it began. That is what makes a hang visible while it hangs.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fioprobe.continuous import protocol
from fioprobe.continuous.device import BlockDevice
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS

NS_PER_SECOND = 1e9


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent view of one stream at one instant (what one scrape exports)."""

    #: Cumulative counts per bucket of LATENCY_BUCKETS_SECONDS, then +Inf.
    buckets: tuple[int, ...]
    sync_sum_seconds: float
    sync_count: int
    inflight_seconds: float
    stall_seconds_total: float
    operations_total: int
    written_bytes_total: int
    errors_total: dict[str, int]
    success: bool
    device: BlockDevice | None
    #: Seconds since the stream's first failure after its last success (0 while it works),
    #: and the reason of its latest failure ("" while it works).
    failing_seconds: float = 0.0
    failing_reason: str = ""
    #: The writer found the target directory off etcd's filesystem (or etcd's data
    #: directory missing) at its last check: the stream must not claim an etcd disk.
    etcd_refused: bool = False


@dataclass(slots=True)
class StreamState:
    """Thread-safe: the writer's reader thread applies events, scrapes take snapshots."""

    stall_threshold_seconds: float
    #: Called with (reason, message) when the stream starts failing or fails differently,
    #: and with (None, "") when it works again: log lines on changes, not every second.
    on_change: Callable[[str | None, str], None] = lambda reason, message: None
    clock_ns: Callable[[], int] = time.monotonic_ns
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_SECONDS) + 1))
    _sync_sum: float = 0.0
    _operations: int = 0
    _bytes: int = 0
    _errors: dict[str, int] = field(default_factory=dict)
    _began_ns: int | None = None
    _stall_done: float = 0.0
    #: Stall of the outstanding operation already exported by a scrape (see `_end`).
    _open_stall_exported: float = 0.0
    _success: bool = False
    _failing: tuple[str, str] | None = None
    #: When the stream started failing (its first failure after a success), or None.
    _failing_since_ns: int | None = None
    _device: BlockDevice | None = None
    #: The writer's last verdict on etcd's filesystem; kept across its restarts until the
    #: next one (none before the first: the configuration's role stands until refused).
    _etcd_refused: bool = False
    #: Resolves a reported major:minor to names (reads sysfs; replaceable in tests).
    resolve_device: Callable[[int, int], BlockDevice] | None = None

    def apply(self, event: protocol.Event) -> None:
        with self._lock:
            change = self._apply(event)
        if change is not None:
            self.on_change(*change)

    def _apply(self, event: protocol.Event) -> tuple[str | None, str] | None:
        if event.kind == protocol.BEGIN:
            self._began_ns = event.t_ns
            self._open_stall_exported = 0.0
            return None
        if event.kind == protocol.END:
            self._end(event.t_ns)
            self._observe(event.sync_ns / NS_PER_SECOND)  # ns to seconds, at the edge
            self._operations += 1
            self._bytes += event.size
            self._success = True
            self._failing_since_ns = None
            if self._failing is not None:
                self._failing = None
                return (None, "")
            return None
        if event.kind == protocol.FAIL:
            self._end(event.t_ns)
            return self._failed(event.reason, event.message)
        if event.kind == protocol.CLEANED:
            # The clean-up after a failure is IO on the same disk: in flight from its BEGIN
            # (a hang there shows), not an fdatasync (nothing observed).
            self._end(event.t_ns)
            return None
        if event.kind == protocol.READY:
            # The set-up (create, preallocate, fdatasync) is done: it was an operation too.
            self._end(self.clock_ns())
            return None
        if event.kind == protocol.ETCD_FILESYSTEM:
            self._etcd_refused = not event.same
            return None
        if event.kind == protocol.DEVICE:
            resolve = self.resolve_device
            if resolve is not None:
                self._device = resolve(event.major, event.minor)
            else:
                self._device = BlockDevice(f"{event.major}:{event.minor}")
        return None

    def held_since(self, seconds_ago: float) -> None:
        """No writer can start: the previous one is still stuck in the kernel on this disk.
        Its outstanding operation is shown as one that began when it was left behind, so
        the in-flight age (and the hang alert on it) carries on across the restart."""
        with self._lock:
            self._began_ns = self.clock_ns() - int(max(0.0, seconds_ago) * NS_PER_SECOND)
            self._open_stall_exported = 0.0

    def held_no_more(self) -> None:
        """The stuck writer has ended: its operation ended with it."""
        with self._lock:
            self._end(self.clock_ns())

    def writer_gone(self, reason: str, message: str) -> None:
        """The writer process ended on its own: an outstanding operation ends with it."""
        with self._lock:
            self._end(self.clock_ns())
            change = self._failed(reason, message)
        if change is not None:
            self.on_change(*change)

    def _failed(self, reason: str, message: str) -> tuple[str | None, str] | None:
        self._errors[reason] = self._errors.get(reason, 0) + 1
        self._success = False
        if self._failing_since_ns is None:
            self._failing_since_ns = self.clock_ns()
        if self._failing is None or self._failing[0] != reason:
            self._failing = (reason, message)
            return (reason, message)
        return None

    def _end(self, t_ns: int) -> None:
        if self._began_ns is None:
            return
        took = max(0, t_ns - self._began_ns) / NS_PER_SECOND
        # A scrape may have computed this operation's stall a moment after it ended, before
        # the writer's line arrived: count at least that much, so the counter never steps
        # back (the difference is the line's delivery time, microseconds).
        stall = max(took - self.stall_threshold_seconds, self._open_stall_exported, 0.0)
        self._stall_done += stall
        self._began_ns = None
        self._open_stall_exported = 0.0

    def _observe(self, seconds: float) -> None:
        # le is inclusive: a value equal to a bound belongs to that bucket.
        self._counts[bisect.bisect_left(LATENCY_BUCKETS_SECONDS, seconds)] += 1
        self._sync_sum += seconds

    def inflight_seconds(self) -> float:
        with self._lock:
            return self._inflight(self.clock_ns())

    def _inflight(self, now_ns: int) -> float:
        if self._began_ns is None:
            return 0.0
        return max(0, now_ns - self._began_ns) / NS_PER_SECOND

    def snapshot(self) -> Snapshot:
        with self._lock:
            now_ns = self.clock_ns()
            inflight = self._inflight(now_ns)
            failing_since = self._failing_since_ns
            open_stall = max(0.0, inflight - self.stall_threshold_seconds)
            self._open_stall_exported = max(self._open_stall_exported, open_stall)
            stall = self._stall_done + open_stall
            cumulative, running = [], 0
            for count in self._counts:
                running += count
                cumulative.append(running)
            return Snapshot(
                buckets=tuple(cumulative),
                sync_sum_seconds=self._sync_sum,
                sync_count=running,
                inflight_seconds=inflight,
                stall_seconds_total=stall,
                operations_total=self._operations,
                written_bytes_total=self._bytes,
                errors_total=dict(self._errors),
                success=self._success,
                device=self._device,
                etcd_refused=self._etcd_refused,
                failing_seconds=(
                    0.0 if failing_since is None else max(0, now_ns - failing_since) / NS_PER_SECOND
                ),
                failing_reason=self._failing[0] if self._failing is not None else "",
            )
