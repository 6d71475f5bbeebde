"""prometheus_client Collector: one probe outcome plus the group's totals -> metric families.

This is where fio fields become metrics. Every family is created through `_family`, which
takes its help text and labels from the metric table (`fioprobe.metrics.table`), so a metric that
is not in the table cannot be exported.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from fioprobe import __version__
from fioprobe.errors import FailureReason
from fioprobe.fio.model import Job, OpStats, Run
from fioprobe.metrics.histogram import LE_LABELS, cumulative, histogram_source
from fioprobe.metrics.table import (
    EXPORTED_OPS,
    METRICS_BY_NAME,
    SUMMARY_QUANTILES,
)
from fioprobe.metrics.totals import GroupTotals

#: (quantile label, fio's percentile key) of each summary quantile: 0.999 -> ("0.999", 99.9).
_QUANTILE_PERCENTS = [(f"{q:g}", round(q * 100, 6)) for q in SUMMARY_QUANTILES]


@dataclass(frozen=True, slots=True)
class VolumeGauges:
    """Volume model values in base units (see `fioprobe.target.volumes`); None = not modelled."""

    size_bytes: float | None = None
    baseline_iops: float | None = None
    burst_iops: float | None = None
    baseline_throughput_bytes_per_second: float | None = None
    burst_throughput_bytes_per_second: float | None = None
    burst_balance_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What one probe run (or one converted file) produced."""

    run: Run | None
    success: bool
    duration_seconds: float
    failure_reason: FailureReason | None = None
    volume_type: str = "unknown"
    provisioner: str = ""
    ran_on_node: str = ""
    volume: VolumeGauges = field(default_factory=VolumeGauges)
    #: The configuration this group belongs to (fioprobe_owner_info), None for none.
    owner: str | None = None
    #: Whether the probed disk holds etcd, from the deployment's configuration; None when
    #: not known (a converted file): the label is then empty, which Prometheus reads as absent.
    etcd_disk: bool | None = None
    #: time.monotonic() at the start of a probe run (the clock is the host's, the same in
    #: every process): fioprobe_duration_seconds then runs up to the push that carries it.
    started_monotonic: float | None = None

    @property
    def pushed_duration_seconds(self) -> float:
        """fioprobe_duration_seconds: for a probe run, from its start to this moment (the
        push being made), so the publish (state, read-back) is in it; else the run's."""
        if self.started_monotonic is None:
            return self.duration_seconds
        return max(self.duration_seconds, time.monotonic() - self.started_monotonic)

    def failed(self, reason: FailureReason) -> ProbeOutcome:
        """This outcome as a failure for `reason` (a failed run exports no last-run data)."""
        return replace(self, run=None, success=False, failure_reason=reason)


class ProbeCollector(Collector):
    """Yields every fioprobe family for one group. Fresh per push: nothing lingers.

    Without `totals`, only the health of this outcome is yielded (success, duration,
    reason, info): what a failure pushed beside a group's counters carries, never touching
    them. `writer` is the identity of the state that owns the counters (see `state`).
    """

    def __init__(
        self,
        outcome: ProbeOutcome,
        totals: GroupTotals | None,
        const_labels: dict[str, str] | None = None,
        writer: str | None = None,
        push_ids: tuple[int, int] | None = None,
    ) -> None:
        self.outcome = outcome
        self.totals = totals
        self.const_labels = dict(const_labels or {})
        self.writer = writer
        self.push_ids = push_ids

    def collect(self) -> Iterator[Metric]:
        totals = self.totals
        if totals is None:
            yield from self._health()
            return
        yield from self._histograms(totals)
        if self.outcome.run is not None:
            yield from self._last_run(self.outcome.run)
        yield from self._health()
        yield from self._cost(totals)
        yield from self._volume()
        if self.writer is not None:
            writer = self._scalar("fioprobe_writer_info")
            writer.add_metric(self._values(self.writer), 1.0)
            yield writer
        if self.push_ids is not None:
            # Whole numbers below 2**53: exact as floats on the wire and in the read-back.
            for name, value in zip(("fioprobe_push_id", "fioprobe_push_basis_id"),
                                   self.push_ids, strict=True):  # fmt: skip
                family = self._scalar(name)
                family.add_metric(self._values(), float(value))
                yield family

    # -- helpers ---------------------------------------------------------------------------

    def _family(self, name: str) -> Metric:
        return metric_family(name, tuple(self.const_labels))

    def _scalar(self, name: str) -> CounterMetricFamily | GaugeMetricFamily:
        """A counter or gauge of the table: one value per label set."""
        family = self._family(name)
        if not isinstance(family, CounterMetricFamily | GaugeMetricFamily):
            raise TypeError(f"{name} is not a counter or gauge in the metric table")
        return family

    def _histogram(self, name: str) -> HistogramMetricFamily:
        family = self._family(name)
        if not isinstance(family, HistogramMetricFamily):
            raise TypeError(f"{name} is not a histogram in the metric table")
        return family

    def _values(self, *extra: str) -> list[str]:
        return [*self.const_labels.values(), *extra]

    # -- families --------------------------------------------------------------------------

    def _histograms(self, group: GroupTotals) -> Iterator[Metric]:
        for op in EXPORTED_OPS:
            totals = group.histograms.get(op)
            if totals is None:
                continue
            family = self._histogram(f"fioprobe_{op}_latency_seconds")
            buckets = list(zip(LE_LABELS, map(float, cumulative(totals.counts)), strict=True))
            family.add_metric(self._values(), buckets, totals.sum_seconds)
            yield family

    def _last_run(self, run: Run) -> Iterator[Metric]:
        families: dict[str, Metric] = {}  # yielded in the order first asked for
        scalars: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}

        def family(name: str) -> Metric:
            if name not in families:
                families[name] = self._family(name)
            return families[name]

        def scalar(name: str) -> CounterMetricFamily | GaugeMetricFamily:
            if name not in scalars:
                families[name] = scalars[name] = self._scalar(name)
            return scalars[name]

        for job in run.jobs:
            for op in EXPORTED_OPS:
                stats = job.ops.get(op)
                if stats is None or not stats.did_io:
                    continue
                self._summary(family(f"fioprobe_last_{op}_latency_seconds"), job, stats)
                if stats.latency is not None and stats.latency.has_data:
                    scalar(f"fioprobe_last_{op}_latency_max_seconds").add_metric(
                        self._values(job.name), stats.latency.max_s
                    )
                scalar(f"fioprobe_{op}_iops").add_metric(
                    self._values(job.name), operation_iops(job, stats)
                )
                if op != "sync":
                    scalar(f"fioprobe_{op}_bandwidth_bytes_per_second").add_metric(
                        self._values(job.name), stats.bandwidth_bytes_per_second
                    )
        yield from families.values()

    def _summary(self, family: Metric, job: Job, stats: OpStats) -> None:
        latency = stats.latency
        if latency is None or not latency.has_data:
            return
        add_latency_summary(family, {**self.const_labels, "fio_job": job.name}, stats)

    def _health(self) -> Iterator[Metric]:
        outcome = self.outcome
        success = self._scalar("fioprobe_success")
        success.add_metric(self._values(), 1.0 if outcome.success else 0.0)
        yield success
        duration = self._scalar("fioprobe_duration_seconds")
        duration.add_metric(self._values(), outcome.pushed_duration_seconds)
        yield duration
        if self.totals is not None and self.totals.last_success_timestamp is not None:
            last = self._scalar("fioprobe_last_success_timestamp_seconds")
            last.add_metric(self._values(), self.totals.last_success_timestamp)
            yield last
        if not outcome.success:
            reason = self._scalar("fioprobe_failure_reason_info")
            reason.add_metric(self._values(outcome.failure_reason or "fio_error"), 1.0)
            yield reason
        info = self._scalar("fioprobe_info")
        run = outcome.run
        info.add_metric(
            self._values(
                run.fio_version if run else "",
                __version__,
                outcome.volume_type,
                outcome.provisioner,
                outcome.ran_on_node,
                histogram_source(run) if run else "none",
                etcd_disk_label(outcome.etcd_disk),
            ),
            1.0,
        )
        yield info
        if outcome.owner is not None:
            # In every push, failures and refusals included: gc decides by it (see gc.py).
            owner = self._scalar("fioprobe_owner_info")
            owner.add_metric(self._values(outcome.owner), 1.0)
            yield owner

    def _cost(self, totals: GroupTotals) -> Iterator[Metric]:
        for name, value in (
            ("fioprobe_runs_total", totals.runs_total),
            ("fioprobe_failures_total", totals.failures_total),
            ("fioprobe_read_bytes_total", totals.read_bytes_total),
            ("fioprobe_written_bytes_total", totals.written_bytes_total),
        ):
            family = self._scalar(name)
            family.add_metric(self._values(), float(value))
            yield family

    def _volume(self) -> Iterator[Metric]:
        volume = self.outcome.volume
        for name, value in (
            ("fioprobe_volume_size_bytes", volume.size_bytes),
            ("fioprobe_volume_baseline_iops", volume.baseline_iops),
            ("fioprobe_volume_burst_iops", volume.burst_iops),
            (
                "fioprobe_volume_baseline_throughput_bytes_per_second",
                volume.baseline_throughput_bytes_per_second,
            ),
            (
                "fioprobe_volume_burst_throughput_bytes_per_second",
                volume.burst_throughput_bytes_per_second,
            ),
            ("fioprobe_volume_burst_balance_ratio", volume.burst_balance_ratio),
        ):
            if value is not None:
                family = self._scalar(name)
                family.add_metric(self._values(), float(value))
                yield family


def add_latency_summary(family: Metric, labels: dict[str, str], stats: OpStats) -> None:
    """One summary's samples from a run's latency: fio's own percentiles as quantiles, and
    sum and count over its samples (mean x count: fio reports no sum)."""
    latency = stats.latency
    assert latency is not None
    name = family.name
    for quantile, percent in _QUANTILE_PERCENTS:
        value = latency.percentiles.get(percent)
        if value is not None:
            family.add_sample(name, {**labels, "quantile": quantile}, value)
    samples = stats.sample_count
    family.add_sample(name + "_sum", labels, latency.mean_s * samples)
    family.add_sample(name + "_count", labels, float(samples))


def etcd_disk_label(etcd_disk: bool | None) -> str:
    """The etcd_disk label: "true", "false", or "" (unknown, which Prometheus drops)."""
    if etcd_disk is None:
        return ""
    return "true" if etcd_disk else "false"


def operation_iops(job: Job, stats: OpStats) -> float:
    """The value of fioprobe_<op>_iops for one job and operation."""
    if stats.op != "sync":
        return stats.iops
    # fio reports no sync iops; fsyncs over the time spent writing is the comparable rate.
    write = job.ops.get("write")
    seconds = write.runtime_s if write is not None and write.runtime_s > 0 else job.runtime_s
    return stats.sample_count / seconds if seconds > 0 else 0.0


def registry_for(
    outcome: ProbeOutcome,
    totals: GroupTotals | None,
    const_labels: dict[str, str] | None = None,
    *,
    writer: str | None = None,
    push_ids: tuple[int, int] | None = None,
) -> CollectorRegistry:
    """A fresh registry holding only this group's families (never the process defaults).

    `push_ids` are this push's identity and the identity of the push it continued from: how
    a writer sees whether a push that replaced its own carried its run along.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(outcome, totals, const_labels, writer, push_ids))
    return registry


def metric_family(name: str, leading_labels: Sequence[str] = ()) -> Metric:
    """An empty family of the metric table's `name`, of its kind, its labels after
    `leading_labels`: every collector's only way to a family, so that no name outside the
    table can be exported."""
    definition = METRICS_BY_NAME[name]
    labels = [*leading_labels, *definition.labels]
    if definition.kind == "histogram":
        return HistogramMetricFamily(name, definition.help, labels=labels)
    if definition.kind == "counter":
        return CounterMetricFamily(name, definition.help, labels=labels)
    if definition.kind == "gauge":
        return GaugeMetricFamily(name, definition.help, labels=labels)
    return Metric(name, definition.help, "summary")
