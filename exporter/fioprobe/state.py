"""Cumulative totals of one probe group, and their persistence.

A Pushgateway keeps only the last push, so every push carries totals over all runs of its
group (DESIGN: "Why cumulative"). Totals are merged here and saved *before* the push: a push
that fails leaves them on disk, and the next successful push carries them. No run is lost.
"""

from __future__ import annotations

import errno
import fcntl
import json
import operator
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .histogram import BUCKET_COUNT, counts_from_bins, counts_from_percentiles
from .metrics import EXPORTED_OPS
from .model import OpStats, Run

#: Bumped whenever the file layout changes; a newer file is refused, never overwritten.
STATE_VERSION = 1


class StateError(RuntimeError):
    """A state file that cannot be trusted: corrupt, from a newer fioprobe, or locked."""


@dataclass(slots=True)
class HistogramTotals:
    """Per-bucket counts (not cumulative; last is +Inf) and the sum of observations."""

    counts: list[int] = field(default_factory=lambda: [0] * BUCKET_COUNT)
    sum_seconds: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add(self, counts: list[int], sum_seconds: float) -> None:
        if len(counts) != len(self.counts):
            raise ValueError(f"{len(counts)} bucket counts, expected {len(self.counts)}")
        self.counts = list(map(operator.add, self.counts, counts))
        self.sum_seconds += sum_seconds


def combine(base: GroupTotals, delta: GroupTotals) -> GroupTotals:
    """`base` (read back from the Pushgateway) plus runs kept locally while it was away."""
    result = GroupTotals(
        runs_total=base.runs_total + delta.runs_total,
        failures_total=base.failures_total + delta.failures_total,
        read_bytes_total=base.read_bytes_total + delta.read_bytes_total,
        written_bytes_total=base.written_bytes_total + delta.written_bytes_total,
        last_success_timestamp=delta.last_success_timestamp or base.last_success_timestamp,
    )
    for source in (base, delta):
        for op, hist in source.histograms.items():
            result.histograms.setdefault(op, HistogramTotals()).add(hist.counts, hist.sum_seconds)
    return result


@dataclass(slots=True)
class GroupTotals:
    """Everything cumulative about one Pushgateway group."""

    histograms: dict[str, HistogramTotals] = field(default_factory=dict)
    runs_total: int = 0
    failures_total: int = 0
    read_bytes_total: int = 0
    written_bytes_total: int = 0
    last_success_timestamp: float | None = None
    #: True while these totals hold only runs that were never combined with the
    #: Pushgateway's earlier totals (it was unreachable when there was no state file yet).
    needs_readback: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "version": STATE_VERSION,
            "histograms": {
                op: {"counts": h.counts, "sum_seconds": h.sum_seconds}
                for op, h in sorted(self.histograms.items())
            },
            "runs_total": self.runs_total,
            "failures_total": self.failures_total,
            "read_bytes_total": self.read_bytes_total,
            "written_bytes_total": self.written_bytes_total,
            "last_success_timestamp": self.last_success_timestamp,
            "needs_readback": self.needs_readback,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> GroupTotals:
        if not isinstance(data, dict):
            raise StateError(f"{where}: state is not a JSON object")
        version = data.get("version")
        if not isinstance(version, int):
            raise StateError(f"{where}: state has no version")
        if version > STATE_VERSION:
            raise StateError(
                f"{where}: written by a newer fioprobe (state version {version}, this one "
                f"reads {STATE_VERSION}); refusing to use or overwrite it"
            )
        try:
            totals = cls(
                runs_total=_count(data, "runs_total"),
                failures_total=_count(data, "failures_total"),
                read_bytes_total=_count(data, "read_bytes_total"),
                written_bytes_total=_count(data, "written_bytes_total"),
                last_success_timestamp=_optional_float(data, "last_success_timestamp"),
                needs_readback=data.get("needs_readback", False) is True,
            )
            for op, hist in data.get("histograms", {}).items():
                counts = hist["counts"]
                if (
                    op not in EXPORTED_OPS
                    or len(counts) != BUCKET_COUNT
                    or any(type(c) is not int or c < 0 for c in counts)
                ):
                    raise ValueError(f"histogram {op!r} is malformed")
                totals.histograms[op] = HistogramTotals(list(counts), float(hist["sum_seconds"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"{where}: state is corrupt ({exc})") from None
        return totals


def _count(data: dict[str, object], key: str) -> int:
    value = data.get(key, 0)
    if type(value) is not int or value < 0:
        raise ValueError(f"{key} is not a non-negative integer")
    return value


def _optional_float(data: dict[str, object], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} is not a number")
    return float(value)


# --- merging a run ------------------------------------------------------------------------


def op_histogram(stats: OpStats) -> tuple[list[int], float, str]:
    """One operation's bucket counts, sum of latencies, and the source used."""
    source = _source(stats)
    latency = stats.latency
    if source == "none" or latency is None:
        return [0] * BUCKET_COUNT, 0.0, "none"
    samples = stats.sample_count
    # fio's mean is exact; mean x N is the exact sum of all observed latencies.
    total_seconds = latency.mean_s * samples
    if source == "bins":
        return counts_from_bins(latency.bins_ns), total_seconds, source
    return counts_from_percentiles(latency, samples), total_seconds, source


def _source(stats: OpStats) -> str:
    """Which source `op_histogram` would use, without computing the counts."""
    latency = stats.latency
    if latency is None or stats.sample_count == 0:
        return "none"
    if latency.bins_ns:
        return "bins"
    return "percentiles" if latency.percentiles or latency.max_s else "none"


def histogram_source(run: Run) -> str:
    """The weakest source any exported histogram of this run came from."""
    sources = {
        _source(stats) for job in run.jobs for op, stats in job.ops.items() if op in EXPORTED_OPS
    }
    for source in ("percentiles", "bins"):
        if source in sources:
            return source
    return "none"


def merge_run(totals: GroupTotals, run: Run | None, *, success: bool, finished_at: float) -> None:
    """Add one run's samples and cost to `totals` (in place)."""
    totals.runs_total += 1
    if not success:
        totals.failures_total += 1
    else:
        totals.last_success_timestamp = finished_at
    if run is None:
        return
    for job in run.jobs:
        for op, stats in job.ops.items():
            if op == "read":
                totals.read_bytes_total += stats.io_bytes
            elif op in ("write", "trim"):
                totals.written_bytes_total += stats.io_bytes
            if op not in EXPORTED_OPS:
                continue
            counts, total_seconds, source = op_histogram(stats)
            if source == "none" and op not in totals.histograms:
                continue
            histogram = totals.histograms.get(op)
            if histogram is None:
                histogram = totals.histograms[op] = HistogramTotals()
            histogram.add(counts, total_seconds)


# --- persistence --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VolumeCredits:
    """Modelled gp2 I/O credits of one dedicated volume, shared by all its probe groups.

    Every profile run on the volume spends from one bucket, so the balance is kept per
    volume (one file beside the groups' state files), never per group.
    """

    balance: float
    at: float


def load_credits(path: Path) -> VolumeCredits | None:
    data = _read_json(path)
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise StateError(f"{path}: credit state has an unknown layout or version")
    try:
        return VolumeCredits(float(data["balance"]), float(data["at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{path}: credit state is corrupt ({exc})") from None


def save_credits(path: Path, credits: VolumeCredits) -> None:
    _write_json(path, {"version": STATE_VERSION, "balance": credits.balance, "at": credits.at})


def _read_json(path: Path) -> object | None:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"{path}: cannot read state: {exc.strerror}") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StateError(f"{path}: state is corrupt (not JSON: {exc.msg})") from None


def load(path: Path) -> GroupTotals | None:
    """The saved totals, or None when there is no state file yet."""
    data = _read_json(path)
    return None if data is None else GroupTotals.from_json(data, str(path))


def save(path: Path, totals: GroupTotals) -> None:
    _write_json(path, totals.to_json())


def _write_json(path: Path, data: object) -> None:
    """Write atomically: a crash leaves either the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def locked(path: Path, *, wait: bool) -> Iterator[None]:
    """Hold an exclusive lock on `path`'s state for one read-merge-save-push cycle.

    Two probes racing on the same state must not both read the old totals and each write
    their own sum (one would be lost), and their pushes must reach the gateway in the order
    of their totals. The lock is an flock on `<path>.lock` beside the state file (the state
    file itself is replaced by rename, so its inode cannot carry the lock); one lock per
    file, so groups sharing a state directory do not wait for each other.
    With `wait=False` the second one fails at once.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StateError(f"{path}: another fioprobe holds its lock") from None
            raise
        yield
    finally:
        os.close(fd)
