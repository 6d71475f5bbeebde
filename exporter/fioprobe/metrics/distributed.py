"""One distributed benchmark -> its metric families (`fioprobe_distributed_*`).

A benchmark is pushed once, as its own group: each server's figures per phase, and fio's
"All clients" aggregate per phase under names of its own (`..._aggregate_...`), so a
dashboard can show fio's aggregate and the sum of the servers side by side and never mistake
one for the other. Nothing here is cumulative: a benchmark is one event, its group holds the
last one. Every family comes from the metric table, as the probe's do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from fioprobe import __version__
from fioprobe.errors import FailureReason
from fioprobe.fio.clientserver import ClientServerRun
from fioprobe.fio.model import OpStats, Run
from fioprobe.metrics.collector import add_latency_summary
from fioprobe.metrics.table import METRICS_BY_NAME

#: The operations a distributed benchmark exports (no sync: its phases do not fsync).
DISTRIBUTED_OPS = ("read", "write")
_DONE = {"read": "read", "write": "written"}


@dataclass(frozen=True, slots=True)
class PhaseResult:
    """One phase (prepare, randread, randwrite) as fio's client reported it."""

    phase: str
    result: ClientServerRun


@dataclass(frozen=True, slots=True)
class BenchmarkOutcome:
    """What one benchmark pushes: its phases, whether all ran, and facts about the plan."""

    phases: tuple[PhaseResult, ...]
    success: bool
    finished_at: float
    servers: int
    block_size: str
    #: The random phases' IO depths (several in a sweep).
    iodepths: tuple[int, ...]
    jobs_per_server: int
    ioengine: str
    #: Every server's `server` label, in the order given (`--servers`).
    server_labels: tuple[str, ...] = ()
    #: Why the benchmark failed (None when it succeeded).
    failure_reason: FailureReason | None = None
    #: The `server` labels of the servers its failure names.
    failed_servers: tuple[str, ...] = ()


class DistributedCollector(Collector):
    """The families of one benchmark; each sample also carries `const_labels`."""

    def __init__(self, outcome: BenchmarkOutcome) -> None:
        self.outcome = outcome

    def collect(self) -> Iterator[Metric]:
        outcome = self.outcome
        yield self._gauge("fioprobe_distributed_success", 1.0 if outcome.success else 0.0)
        yield self._gauge("fioprobe_distributed_timestamp_seconds", outcome.finished_at)
        yield self._gauge("fioprobe_distributed_servers", float(outcome.servers))
        if not outcome.success:
            reason = self._new_gauge("fioprobe_distributed_failure_reason_info")
            reason.add_metric([outcome.failure_reason or FailureReason.FIO_ERROR], 1.0)
            yield reason
        # One series per server, failed or not (as `up` per target): `== 0` lists the servers
        # a failure names, and the count stays that of --servers.
        server_success = self._new_gauge("fioprobe_distributed_server_success")
        for label in outcome.server_labels:
            server_success.add_metric([label], 0.0 if label in outcome.failed_servers else 1.0)
        yield server_success
        info = self._new_gauge("fioprobe_distributed_info")
        versions = {phase.result.servers[0].run.fio_version for phase in outcome.phases}
        info.add_metric(
            [
                ",".join(sorted(versions)),
                __version__,
                outcome.block_size,
                ",".join(map(str, outcome.iodepths)),
                str(outcome.jobs_per_server),
                outcome.ioengine,
            ],
            1.0,
        )
        yield info
        yield from self._per_server()
        yield from self._aggregate()

    def _per_server(self) -> Iterator[Metric]:
        runtime = self._new_gauge("fioprobe_distributed_runtime_seconds")
        families: dict[str, Metric] = {}
        for phase in self.outcome.phases:
            for server in phase.result.servers:
                labels = [phase.phase, server.server]
                ran = 0.0
                for op in DISTRIBUTED_OPS:
                    stats = single_op(server.run, op)
                    if stats is None:
                        continue
                    ran = max(ran, stats.runtime_s)
                    self._rates(families, f"fioprobe_distributed_{op}", labels, stats)
                    self._add(
                        families, f"fioprobe_distributed_{_DONE[op]}_bytes", labels, stats.io_bytes
                    )
                # fio's `runtime` of the direction: job_runtime adds up the jobs' times.
                runtime.add_metric(labels, ran)
        yield runtime
        yield from families.values()

    def _aggregate(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for phase in self.outcome.phases:
            aggregate = phase.result.aggregate
            if aggregate is None:  # one server: fio writes no aggregate, none is made up
                continue
            for op in DISTRIBUTED_OPS:
                stats = single_op(aggregate, op)
                if stats is None:
                    continue
                self._rates(families, f"fioprobe_distributed_aggregate_{op}", [phase.phase], stats)
        yield from families.values()

    # -- helpers ---------------------------------------------------------------------------

    def _rates(
        self, families: dict[str, Metric], prefix: str, labels: list[str], stats: OpStats
    ) -> None:
        """IOPS, bandwidth and the latency summary of one direction, per server or in all."""
        self._add(families, f"{prefix}_iops", labels, stats.iops)
        self._add(
            families,
            f"{prefix}_bandwidth_bytes_per_second",
            labels,
            stats.bandwidth_bytes_per_second,
        )
        self._summary(families, f"{prefix}_latency_seconds", labels, stats)

    def _new_gauge(self, name: str) -> GaugeMetricFamily:
        definition = METRICS_BY_NAME[name]
        if definition.kind != "gauge":
            raise TypeError(f"{name} is not a gauge in the metric table")
        return GaugeMetricFamily(name, definition.help, labels=list(definition.labels))

    def _gauge(self, name: str, value: float) -> GaugeMetricFamily:
        family = self._new_gauge(name)
        family.add_metric([], value)
        return family

    def _add(self, families: dict[str, Metric], name: str, labels: list[str], value: float) -> None:
        family = families.get(name)
        if family is None:
            family = families[name] = self._new_gauge(name)
        if not isinstance(family, GaugeMetricFamily):
            raise TypeError(f"{name} is not a gauge")
        family.add_metric(labels, float(value))

    def _summary(
        self, families: dict[str, Metric], name: str, values: list[str], stats: OpStats
    ) -> None:
        definition = METRICS_BY_NAME[name]
        if definition.kind != "summary":
            raise TypeError(f"{name} is not a summary in the metric table")
        latency = stats.latency
        if latency is None or not latency.has_data:
            return
        family = families.get(name)
        if family is None:
            family = families[name] = Metric(name, definition.help, "summary")
        add_latency_summary(family, dict(zip(definition.labels, values, strict=True)), stats)


def single_op(run: Run, op: str) -> OpStats | None:
    """The direction `op` of the run's one job, when it did IO.

    fioprobe's job files set group_reporting, so fio reports one entry per server and phase;
    a run with several entries for one direction has no single figure to export (None).
    """
    stats = [job.ops[op] for job in run.jobs if op in job.ops and job.ops[op].did_io]
    return stats[0] if len(stats) == 1 else None


def registry_for_benchmark(outcome: BenchmarkOutcome) -> CollectorRegistry:
    """A fresh registry holding only this benchmark's families."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DistributedCollector(outcome))
    return registry
