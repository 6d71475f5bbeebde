"""Cumulative totals of one probe group, and their persistence.

A Pushgateway keeps only the last push, so every push carries totals over all runs of its
group (DESIGN: "Why cumulative"). Totals are merged here and saved *before* the push: a push
that fails leaves them on disk, and the next successful push carries them. No run is lost.
Who may push a group's totals, and when the Pushgateway is read again, is `publish`'s part.
"""

from __future__ import annotations

import math
import operator
import secrets
from dataclasses import dataclass, field

from fioprobe.fio.model import OpStats, Run
from fioprobe.metrics.histogram import BUCKET_COUNT, counts_from_bins, counts_from_percentiles
from fioprobe.metrics.table import EXPORTED_OPS
from fioprobe.publish.statefile import StateError, StateFile

#: Bumped whenever the file layout changes; a newer file is refused, never overwritten.
#: Version 1 held the totals alone; version 2 adds the writer identity and pending runs.
STATE_VERSION = 2

#: Every count fioprobe keeps (runs, bytes, histogram buckets) stays below this. Counts are
#: floats on the wire, and from 2**53 on consecutive integers are no longer distinct: an
#: increment could be lost, and the read-back could not tell the count from garbage. The
#: state file, the push and the read-back all use this one limit.
COUNT_LIMIT = 2**53
_COUNT_LIMIT_SHOWN = "2**53"
#: What to do when a group's totals reach the limit.
_RESET_HINT = (
    "to start its counters again from 0, delete the group from the Pushgateway and remove "
    "this state file"
)


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


@dataclass(slots=True)
class GroupTotals:
    """Everything cumulative about one Pushgateway group."""

    histograms: dict[str, HistogramTotals] = field(default_factory=dict)
    runs_total: int = 0
    failures_total: int = 0
    read_bytes_total: int = 0
    written_bytes_total: int = 0
    last_success_timestamp: float | None = None

    @property
    def empty(self) -> bool:
        return self.runs_total == 0 and not self.histograms

    def to_json(self) -> dict[str, object]:
        return {
            "histograms": {
                op: {"counts": h.counts, "sum_seconds": h.sum_seconds}
                for op, h in sorted(self.histograms.items())
            },
            "runs_total": self.runs_total,
            "failures_total": self.failures_total,
            "read_bytes_total": self.read_bytes_total,
            "written_bytes_total": self.written_bytes_total,
            "last_success_timestamp": self.last_success_timestamp,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> GroupTotals:
        """Totals from a state file, every number checked: a bad one is a StateError."""
        if not isinstance(data, dict):
            raise StateError(f"{where}: state is corrupt (totals are not an object)")
        try:
            totals = cls(
                runs_total=_count(data, "runs_total"),
                failures_total=_count(data, "failures_total"),
                read_bytes_total=_count(data, "read_bytes_total"),
                written_bytes_total=_count(data, "written_bytes_total"),
                last_success_timestamp=_optional_float(data, "last_success_timestamp"),
            )
            for op, hist in data.get("histograms", {}).items():
                counts, seconds = hist["counts"], hist["sum_seconds"]
                if (
                    op not in EXPORTED_OPS
                    or len(counts) != BUCKET_COUNT
                    or any(type(c) is not int or c < 0 for c in counts)
                    or isinstance(seconds, bool)
                    or not isinstance(seconds, int | float)
                    or not (math.isfinite(seconds) and seconds >= 0)
                ):
                    raise ValueError(f"histogram {op!r} is malformed")
                totals.histograms[op] = HistogramTotals(list(counts), float(seconds))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"{where}: state is corrupt ({exc})") from None
        problem = totals.beyond_limit()
        if problem is not None:
            raise StateError(
                f"{where}: {problem}, at or above {_COUNT_LIMIT_SHOWN}, the limit of exact "
                f"counting; refusing to push it ({_RESET_HINT})"
            )
        return totals

    def beyond_limit(self) -> str | None:
        """The first count at or above COUNT_LIMIT, as words, or None when all are below.

        A histogram is pushed cumulatively, so its total count is what must stay below.
        """
        for name in _COUNTER_FIELDS:
            value = getattr(self, name)
            if value >= COUNT_LIMIT:
                return f"{name} is {value}"
        for op, histogram in sorted(self.histograms.items()):
            if histogram.count >= COUNT_LIMIT:
                return f"the {op} histogram counts {histogram.count} samples"
        return None


#: The counters of GroupTotals, by their attribute names.
_COUNTER_FIELDS = ("runs_total", "failures_total", "read_bytes_total", "written_bytes_total")


def _count(data: dict[str, object], key: str) -> int:
    value = data.get(key, 0)
    if type(value) is not int or value < 0:
        raise ValueError(f"{key} is not a non-negative integer")
    return value


def _optional_float(data: dict[str, object], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{key} is not a number")
    return float(value)


@dataclass(slots=True)
class GroupState:
    """What one writer keeps about one group between runs.

    `writer` is this state's random identity, pushed as fioprobe_writer_info{writer}: a
    group's counters have one owner (a state that has outlived a run), so that two
    writers (a hand-run probe beside the
    CronJob, a pod rescheduled with a fresh volume while the old one still pushes) can never
    make them go backwards or count a run twice. `totals` are what this writer pushes as the
    owner (None until it owns the group); `pending` holds runs counted in no pushed totals
    yet: kept while the Pushgateway could not be read, or while another writer owns the
    group; they are added when this writer takes the group over. `last_push_at` is this
    writer's clock at its last successful push, which decides when to look at the group again.
    """

    writer: str = field(default_factory=lambda: secrets.token_hex(8))
    totals: GroupTotals | None = None
    pending: GroupTotals = field(default_factory=GroupTotals)
    last_push_at: float | None = None
    #: Whether this state's pushes carry its writer identity (it outlived a run).
    claimed: bool = False
    #: The Pushgateway replica that holds this group's last push (None: unknown, e.g. a state
    #: from before sharding). When the replicas change, the group moves from there.
    shard: str | None = None
    #: The fioprobe_push_id of this writer's last successful push (None: none yet).
    push_id: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "version": STATE_VERSION,
            "writer": self.writer,
            "totals": None if self.totals is None else self.totals.to_json(),
            "pending": self.pending.to_json(),
            "last_push_at": self.last_push_at,
            "claimed": self.claimed,
            "shard": self.shard,
            "push_id": self.push_id,
        }

    @classmethod
    def from_json(cls, data: object, where: str) -> GroupState:
        if not isinstance(data, dict):
            raise StateError(f"{where}: state is corrupt (not a JSON object)")
        version = data.get("version")
        if type(version) is not int:
            raise StateError(f"{where}: state is corrupt (no version)")
        if version > STATE_VERSION:
            raise StateError(
                f"{where}: written by a newer fioprobe (state version {version}, this one "
                f"reads {STATE_VERSION}); refusing to use or overwrite it"
            )
        if version == 1:  # the totals alone; runs never combined with the gateway's: pending
            totals = GroupTotals.from_json(data, where)
            if data.get("needs_readback") is True:
                return cls(pending=totals)
            return cls(totals=totals)
        writer = data.get("writer")
        if not isinstance(writer, str) or not 1 <= len(writer) <= 64 or not writer.isalnum():
            raise StateError(f"{where}: state is corrupt (writer is not an identifier)")
        try:
            last_push_at = _optional_float(data, "last_push_at")
        except ValueError as exc:
            raise StateError(f"{where}: state is corrupt ({exc})") from None
        raw_totals = data.get("totals")
        return cls(
            writer=writer,
            totals=None if raw_totals is None else GroupTotals.from_json(raw_totals, where),
            pending=GroupTotals.from_json(data.get("pending", {}), where),
            last_push_at=last_push_at,
            claimed=data.get("claimed") is True,
            shard=_optional_shard(data, where),
            push_id=_optional_push_id(data, where),
        )


def _optional_push_id(data: dict[str, object], where: str) -> int | None:
    push_id = data.get("push_id")
    if push_id is None:
        return None
    if type(push_id) is not int or not 0 < push_id < COUNT_LIMIT:
        raise StateError(f"{where}: state is corrupt (push_id is not a push identity)")
    return push_id


def _optional_shard(data: dict[str, object], where: str) -> str | None:
    shard = data.get("shard")
    if shard is None:
        return None
    if not isinstance(shard, str) or not 1 <= len(shard) <= 2048 or not shard.isprintable():
        raise StateError(f"{where}: state is corrupt (shard is not a URL)")
    return shard


def combine(base: GroupTotals, delta: GroupTotals) -> GroupTotals:
    """`base` (read back from the Pushgateway) plus runs counted in no pushed totals yet."""
    result = GroupTotals(
        runs_total=base.runs_total + delta.runs_total,
        failures_total=base.failures_total + delta.failures_total,
        read_bytes_total=base.read_bytes_total + delta.read_bytes_total,
        written_bytes_total=base.written_bytes_total + delta.written_bytes_total,
        last_success_timestamp=_latest(base.last_success_timestamp, delta.last_success_timestamp),
    )
    for source in (base, delta):
        for op, hist in source.histograms.items():
            result.histograms.setdefault(op, HistogramTotals()).add(hist.counts, hist.sum_seconds)
    return result


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def load(file: StateFile) -> GroupState | None:
    """The saved state, or None when there is none yet."""
    data = file.read()
    return None if data is None else GroupState.from_json(data, str(file.path))


def save(file: StateFile, group: GroupState) -> None:
    """Write the state; totals that reached COUNT_LIMIT are refused instead (StateError):
    pushed, they would no longer be exact, and every later run would refuse the file."""
    for what, totals in (("totals", group.totals), ("pending runs", group.pending)):
        problem = None if totals is None else totals.beyond_limit()
        if problem is not None:
            raise StateError(
                f"{file.path}: this run would take the group's {what} to or beyond "
                f"{_COUNT_LIMIT_SHOWN}, the limit of exact counting ({problem}); it was not "
                f"counted ({_RESET_HINT})"
            )
    file.write(group.to_json())


# --- merging a run ------------------------------------------------------------------------


def op_histogram(stats: OpStats) -> tuple[list[int], float, str]:
    """One operation's bucket counts, sum of latencies, and the source used.

    With source "none" the run adds nothing to the histogram: fio gave neither bins nor
    percentiles that place its samples, and a guessed bucket could fire an alert.
    """
    source = _source(stats)
    latency = stats.latency
    if source == "none" or latency is None:
        return [0] * BUCKET_COUNT, 0.0, "none"
    samples = stats.sample_count
    # fio's mean is exact; mean x N is the exact sum of all observed latencies.
    total_seconds = latency.mean_s * samples
    if source == "bins":
        return counts_from_bins(latency.bins_ns), total_seconds, source
    counts = counts_from_percentiles(latency, samples)
    if counts is None:
        return [0] * BUCKET_COUNT, 0.0, "none"
    return counts, total_seconds, source


def _source(stats: OpStats) -> str:
    """Which source `op_histogram` uses, without computing the counts."""
    latency = stats.latency
    if latency is None or stats.sample_count == 0:
        return "none"
    if latency.bins_ns:
        return "bins"
    if latency.percentiles:
        return "percentiles"
    if latency.max_s and counts_from_percentiles(latency, 1) is not None:
        return "percentiles"  # min and max in one bucket: placed exactly
    return "none"


def histogram_source(run: Run) -> str:
    """The weakest source any exported histogram of this run came from."""
    sources = {
        _source(stats)
        for job in run.jobs
        for op, stats in job.ops.items()
        if op in EXPORTED_OPS and stats.sample_count > 0
    }
    for source in ("none", "percentiles", "bins"):
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
            if source == "none":
                continue
            histogram = totals.histograms.get(op)
            if histogram is None:
                histogram = totals.histograms[op] = HistogramTotals()
            histogram.add(counts, total_seconds)


# --- the modelled gp2 credit balance --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VolumeCredits:
    """Modelled gp2 I/O credits of one dedicated volume, shared by all its probe groups.

    Every profile run on the volume spends from one bucket, so the balance is kept per
    volume (one file beside the groups' state files), never per group.
    """

    balance: float
    at: float


def load_credits(file: StateFile) -> VolumeCredits | None:
    data = file.read()
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("version") not in (1, STATE_VERSION):
        raise StateError(f"{file.path}: credit state has an unknown layout or version")
    try:
        credits = VolumeCredits(float(data["balance"]), float(data["at"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{file.path}: credit state is corrupt ({exc})") from None
    if not (math.isfinite(credits.balance) and math.isfinite(credits.at)) or credits.balance < 0:
        raise StateError(f"{file.path}: credit state is corrupt (not a finite balance)")
    return credits


def save_credits(file: StateFile, credits: VolumeCredits) -> None:
    file.write({"version": STATE_VERSION, "balance": credits.balance, "at": credits.at})
