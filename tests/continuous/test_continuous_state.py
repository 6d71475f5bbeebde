"""The stream's bookkeeping without processes: events in, what a scrape exports out."""

from __future__ import annotations

from pathlib import Path

import pytest
from fioprobe.continuous import protocol
from fioprobe.continuous.device import BlockDevice, block_device
from fioprobe.continuous.state import StreamState
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS

MS = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000 * MS

    def __call__(self) -> int:
        return self.now


def state(clock: Clock, changes: list[tuple[str | None, str]] | None = None) -> StreamState:
    record = changes if changes is not None else []
    return StreamState(
        stall_threshold_seconds=0.01,
        clock_ns=clock,
        on_change=lambda reason, message: record.append((reason, message)),
    )


def op(s: StreamState, clock: Clock, took_ms: float, sync_ms: float) -> None:
    s.apply(protocol.Event(protocol.BEGIN, t_ns=clock.now))
    clock.now += int(took_ms * MS)
    s.apply(protocol.Event(protocol.END, t_ns=clock.now, sync_ns=int(sync_ms * MS), size=2300))


def test_buckets_are_inclusive_and_10_ms_is_exact() -> None:
    clock = Clock()
    s = state(clock)
    for sync_ms in (0.05, 10.0, 10.001, 9000):
        op(s, clock, sync_ms, sync_ms)
    snap = s.snapshot()
    at = dict(zip((*LATENCY_BUCKETS_SECONDS, float("inf")), snap.buckets, strict=True))
    assert at[0.0001] == 1
    assert at[0.01] == 2  # 10 ms is in le="0.01"
    assert at[0.016] == 3
    assert at[8.192] == 3 and at[float("inf")] == 4
    assert snap.sync_count == 4 and snap.operations_total == 4
    assert snap.written_bytes_total == 4 * 2300
    assert snap.sync_sum_seconds == pytest.approx((0.05 + 10 + 10.001 + 9000) / 1000)


def test_inflight_and_stall_grow_during_a_hang_and_never_step_back() -> None:
    clock = Clock()
    s = state(clock)
    s.apply(protocol.Event(protocol.BEGIN, t_ns=clock.now))
    clock.now += 5_000 * MS
    snap = s.snapshot()
    assert snap.inflight_seconds == pytest.approx(5.0)
    assert snap.stall_seconds_total == pytest.approx(4.99)
    # The scrape came a moment after the operation ended, before the writer's line did:
    clock.now += 100 * MS
    late = s.snapshot().stall_seconds_total
    s.apply(protocol.Event(protocol.END, t_ns=clock.now - 50 * MS, sync_ns=5_000 * MS, size=1))
    after = s.snapshot()
    assert after.inflight_seconds == 0
    assert after.stall_seconds_total == late  # not 5.04: a counter never goes back
    op(s, clock, 30, 29)
    assert s.snapshot().stall_seconds_total == pytest.approx(late + 0.02)


def test_failures_count_by_reason_and_log_on_change_only() -> None:
    clock, changes = Clock(), []
    s = state(clock, changes)
    for _ in range(3):
        s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="io_error", message="EIO"))
    s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="no_space", message="full"))
    op(s, clock, 1, 1)
    s.writer_gone("interrupted", "killed by signal 9")
    snap = s.snapshot()
    assert snap.errors_total == {"io_error": 3, "no_space": 1, "interrupted": 1}
    assert snap.success is False
    assert changes == [
        ("io_error", "EIO"),
        ("no_space", "full"),
        (None, ""),
        ("interrupted", "killed by signal 9"),
    ]


def test_failing_seconds_count_from_the_first_failure_after_a_success() -> None:
    """How long no operation has succeeded, and the latest reason: what the failing alert
    reads. A single failure between successes is a moment, not minutes."""
    clock = Clock()
    s = state(clock)
    assert (s.snapshot().failing_seconds, s.snapshot().failing_reason) == (0.0, "")
    op(s, clock, 1, 1)
    s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="io_error", message="EIO"))
    clock.now += 1_000 * MS
    op(s, clock, 1, 1)
    assert (s.snapshot().failing_seconds, s.snapshot().failing_reason) == (0.0, "")
    s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="io_error", message="EIO"))
    for _ in range(90):
        clock.now += 1_000 * MS
        s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="io_error", message="EIO"))
    clock.now += 500 * MS
    snap = s.snapshot()
    assert snap.failing_seconds == pytest.approx(90.5)
    assert snap.failing_reason == "io_error"
    # Another reason: the latest is named, the time runs on from the first failure.
    s.writer_gone("unsafe_target", "planted")
    snap = s.snapshot()
    assert snap.failing_seconds == pytest.approx(90.5)
    assert snap.failing_reason == "unsafe_target"
    op(s, clock, 1, 1)
    assert (s.snapshot().failing_seconds, s.snapshot().failing_reason) == (0.0, "")


@pytest.mark.parametrize(
    "line",
    [
        "",
        "B",
        "B x",
        "E 1 2",
        "E 1 2 x",
        "F x io_error m",
        "D 1",
        "Z 1 2",
        "B 1 2",
        "R x /p",
        "C",
        "C x",
        "C 1 2",
    ],
)
def test_lines_that_are_not_events_are_ignored(line: str) -> None:
    assert protocol.parse(line) is None


def test_events_round_trip() -> None:
    assert protocol.parse(protocol.begin(5)) == protocol.Event("B", t_ns=5)
    assert protocol.parse(protocol.end(7, 3, 2300)) == protocol.Event(
        "E", t_ns=7, sync_ns=3, size=2300
    )
    failed = protocol.parse(protocol.fail(9, "io_error", "a\nb  c"))
    assert failed == protocol.Event("F", t_ns=9, reason="io_error", message="a b c")
    assert protocol.parse(protocol.device(259, 1)) == protocol.Event("D", major=259, minor=1)
    assert protocol.parse(protocol.cleaned(11)) == protocol.Event("C", t_ns=11)


def test_the_clean_up_after_a_failure_is_in_flight_but_no_fdatasync() -> None:
    """A failed operation ends; the clean-up that follows is in flight from its BEGIN until
    CLEANED (its stall counts: the disk hung), and adds nothing to the latency histogram."""
    clock = Clock()
    s = state(clock)
    s.apply(protocol.Event(protocol.BEGIN, t_ns=clock.now))
    clock.now += 2 * MS
    s.apply(protocol.Event(protocol.FAIL, t_ns=clock.now, reason="io_error", message="EIO"))
    assert s.snapshot().inflight_seconds == 0
    s.apply(protocol.Event(protocol.BEGIN, t_ns=clock.now))
    clock.now += 3_000 * MS
    snap = s.snapshot()
    assert snap.inflight_seconds == pytest.approx(3.0)
    s.apply(protocol.Event(protocol.CLEANED, t_ns=clock.now))
    snap = s.snapshot()
    assert snap.inflight_seconds == 0 and snap.sync_count == 0 and snap.operations_total == 0
    assert snap.stall_seconds_total == pytest.approx(3.0 - 0.01)


def test_block_device_names_partition_and_whole_disk(tmp_path: Path) -> None:
    disk = tmp_path / "devices" / "nvme0n1"
    part = disk / "nvme0n1p1"
    part.mkdir(parents=True)
    (disk / "uevent").write_text("MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\n")
    (part / "uevent").write_text("MAJOR=259\nMINOR=1\nDEVNAME=nvme0n1p1\nDEVTYPE=partition\n")
    (part / "partition").write_text("1\n")
    block = tmp_path / "block"
    block.mkdir()
    (block / "259:1").symlink_to(part)
    (block / "259:0").symlink_to(disk)
    assert block_device(259, 1, block) == BlockDevice("259:1", "nvme0n1p1", "nvme0n1")
    assert block_device(259, 0, block) == BlockDevice("259:0", "nvme0n1", "nvme0n1")
    assert block_device(0, 53, block) == BlockDevice("0:53")  # tmpfs, FUSE: no block device
    assert block_device(8, 0, block) == BlockDevice("8:0")  # unknown to sysfs
