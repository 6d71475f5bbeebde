"""Typed model of one fio run, independent of fio's version and output quirks.

The reader (`fioparse`) converts every time unit to seconds and every size to bytes at
the edge, so nothing downstream needs to know that fio 2.x wrote microseconds and KiB.

The classes are treated as immutable once read, but are not `frozen`: a frozen dataclass
sets each field through `object.__setattr__`, which made reading a 64-job json+ file
(about 700 of these objects) 8% slower when measured (bench/exporter_bench.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The operation sections fio writes per job. `mixed` appears with unified_rw_reporting.
OPERATIONS = ("read", "write", "trim", "sync", "mixed")


@dataclass(slots=True)
class Bins:
    """fio's json+ latency histogram: ascending bin values (ns) and their counts.

    Two parallel lists rather than a dict: the reader sorts once, and turning bins into
    contract buckets is then a bisection plus C-level sums of slices.
    """

    latencies_ns: list[int]
    counts: list[int]

    def __bool__(self) -> bool:
        return bool(self.counts)

    def total(self) -> int:
        return sum(self.counts)


@dataclass(slots=True)
class LatencyStats:
    """One fio latency block (clat, lat or sync lat), in seconds.

    `samples` is fio's `N`; old versions do not report it (None). `percentiles` maps the
    percent fio printed (99.0, 99.9, ...) to the latency in seconds. `bins_ns` is the json+
    histogram (see `Bins`).
    """

    min_s: float
    max_s: float
    mean_s: float
    stddev_s: float
    samples: int | None
    percentiles: dict[float, float]
    bins_ns: Bins | None

    @property
    def has_data(self) -> bool:
        """False for the all-zero blocks fio writes with gtod_reduce or an idle direction."""
        return bool(self.samples) or bool(self.bins_ns) or self.max_s > 0


@dataclass(slots=True)
class OpStats:
    """One direction of one job (read, write, trim, sync or mixed)."""

    op: str
    io_bytes: int
    bandwidth_bytes_per_second: float
    iops: float
    runtime_s: float
    total_ios: int
    #: Completion latency for read/write/trim (fio `clat`), fsync latency for sync.
    latency: LatencyStats | None
    #: Which fio block `latency` came from: "clat", "lat" (fallback) or "sync".
    latency_kind: str

    @property
    def sample_count(self) -> int:
        """Number of latency samples: fio's N when reported, else the IO count.

        fio 2.1 reports neither N nor total_ios; iops x runtime is then the best estimate.
        """
        if self.latency is not None and self.latency.samples is not None:
            return self.latency.samples
        if self.latency is not None and self.latency.bins_ns:
            return self.latency.bins_ns.total()
        if self.total_ios:
            return self.total_ios
        return round(self.iops * self.runtime_s)

    @property
    def did_io(self) -> bool:
        """Whether this direction did any IO: fio writes all-zero sections for idle ones
        (a read-only job's write section), which must not become zero-valued series."""
        return self.total_ios > 0 or self.io_bytes > 0 or self.sample_count > 0


@dataclass(slots=True)
class Job:
    """One entry of fio's `jobs` (or `client_stats`) list."""

    name: str
    #: fio's own job name; `name` differs only when fio reported several jobs of this name.
    fio_name: str
    error: int
    runtime_s: float
    ops: dict[str, OpStats]
    hostname: str | None = None


@dataclass(slots=True)
class Run:
    """One fio invocation's result."""

    source: str
    fio_version: str
    #: Unix time fio wrote with its result (end of the run); None for versions without it.
    timestamp: float | None
    jobs: list[Job]
    options: dict[str, str] = field(default_factory=dict)

    @property
    def failed_jobs(self) -> list[Job]:
        return [job for job in self.jobs if job.error != 0]
