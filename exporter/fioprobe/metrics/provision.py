"""The provisioning probe's metric families: one run's result plus its group's totals.

A group is one StorageClass (and node, for a class bound to nodes) under its own job,
`fioprobe_provision`. What is cumulative (the step histogram, runs, failures, objects
removed, the last success) is kept and read back by the same path as the fio probes' totals
(`fioprobe.publish.outcome`), described by `PROVISION_SCHEMA`; what is the last run's (its
steps, its verdict, what it left) is pushed as gauges and replaced by the next run.

Three states, each telling alerts apart from the others:
- success: `fioprobe_provision_success 1`;
- failure: `fioprobe_provision_success 0` with `fioprobe_provision_failure_reason_info
  {reason, step}`, the reason one of `fioprobe.provision.reasons.Reason`;
- skipped (a class that keeps its volumes, or has no dynamic provisioner: never provisioned):
  no success gauge at all, but `fioprobe_provision_skipped_info{reason}` (`retain_policy`,
  `no_provisioner`), so that `success == 0` never pages for a class that is left alone on
  purpose, while the run's timestamp still moves (a stale group is still told from a skipped
  one). A skip is not a run: no counter grows.
A run that could not be counted (its state not kept, another writer's group) is pushed as
failing, with the probes' own reason (`state_error`, `writer_conflict`, ...), as theirs are.

Every run and skip that read its StorageClass also pushes `fioprobe_provision_info
{provisioner, volume_type, binding_mode}`: what the class is, so that alerts and panels can
tell an EBS attach from a Ceph map and an Immediate class from a WaitForFirstConsumer one
without a second source. The provisioner comes from the cluster and is bounded
(`objects.provisioner_label`); the type is one of the closed set.

Every family is made through the metric table (`fioprobe.metrics.table`): a name that is not
in it cannot be exported.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, replace

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from fioprobe.errors import FailureReason
from fioprobe.grouping import PROVISION_JOB
from fioprobe.metrics.collector import metric_family
from fioprobe.metrics.histogram import le_label
from fioprobe.metrics.totals import GroupSchema, GroupTotals, HistogramRow, HistogramTotals
from fioprobe.provision.objects import provisioner_label
from fioprobe.provision.runner import RunResult
from fioprobe.provision.steps import STEP_BUCKETS, Step

STEP_HISTOGRAM = "fioprobe_provision_step_duration_seconds"
#: The key of the objects-removed counter in the group's totals (`GroupTotals.other`).
OBJECTS_REMOVED = "objects_removed_total"
#: The bucket bounds of the step histogram, +Inf included.
STEP_BOUNDS: tuple[float, ...] = (*STEP_BUCKETS, math.inf)
_LE_LABELS = tuple(map(le_label, STEP_BOUNDS))

#: What a provisioning group keeps cumulatively, and under which names.
PROVISION_SCHEMA = GroupSchema(
    job=PROVISION_JOB,
    counters=(
        ("runs_total", "fioprobe_provision_runs_total"),
        ("failures_total", "fioprobe_provision_failures_total"),
        (OBJECTS_REMOVED, "fioprobe_provision_objects_removed_total"),
    ),
    last_success="fioprobe_provision_last_success_timestamp_seconds",
    histograms=tuple(
        HistogramRow(step.value, STEP_HISTOGRAM, (("step", step.value),)) for step in Step
    ),
    bounds=STEP_BOUNDS,
)


@dataclass(frozen=True, slots=True)
class ProvisionOutcome:
    """One provisioning run as it is pushed."""

    result: RunResult
    #: Unix time the run ended: fioprobe_provision_last_run_timestamp_seconds.
    finished_at: float
    #: The configuration the group belongs to (fioprobe_owner_info), None for none.
    owner: str | None = None
    #: Why the run could not be counted (a state not kept, another writer), or None.
    not_counted: FailureReason | None = None

    @property
    def success(self) -> bool:
        return self.result.success and self.not_counted is None

    @property
    def failure_reason(self) -> FailureReason | None:
        """The probes' reason of a run that could not be counted; a run's own failure is a
        provisioning reason (`result.failure`), not one of these."""
        return self.not_counted

    def failed(self, reason: FailureReason) -> ProvisionOutcome:
        return replace(self, not_counted=reason)


def step_counts(seconds: float) -> list[int]:
    """One sample of `seconds` as per-bucket counts of the step histogram (+Inf last)."""
    counts = [0] * len(STEP_BOUNDS)
    counts[bisect_left(STEP_BUCKETS, seconds)] += 1
    return counts


def merge_result(totals: GroupTotals, outcome: ProvisionOutcome, finished_at: float) -> None:
    """Add one run to its group's totals (in place): a sample per finished step, the run and
    its failure, the objects it removed. A skipped class adds only what it removed."""
    result = outcome.result
    if result.removed:
        totals.set_count(OBJECTS_REMOVED, totals.count(OBJECTS_REMOVED) + len(result.removed))
    if result.skipped is not None:
        return
    totals.runs_total += 1
    if result.success:
        totals.last_success_timestamp = finished_at
    else:
        totals.failures_total += 1
    for timed in result.steps:
        seconds = max(timed.seconds, 0.0)
        histogram = totals.histograms.get(timed.step.value)
        if histogram is None:
            histogram = totals.histograms[timed.step.value] = HistogramTotals(
                [0] * len(STEP_BOUNDS)
            )
        histogram.add(step_counts(seconds), seconds)


class ProvisionCollector(Collector):
    """Yields the families of one provisioning group. Fresh per push: nothing lingers.

    Without `totals`, only the run's own gauges (its verdict, steps, time, what it left):
    what a run that could not be counted pushes beside the group's counters.
    """

    def __init__(
        self,
        outcome: ProvisionOutcome,
        totals: GroupTotals | None,
        writer: str | None = None,
        push_ids: tuple[int, int] | None = None,
    ) -> None:
        self.outcome = outcome
        self.totals = totals
        self.writer = writer
        self.push_ids = push_ids

    def collect(self) -> Iterator[Metric]:
        yield from self._last_run()
        if self.totals is not None:
            yield from self._totals(self.totals)
        if self.outcome.owner is not None:
            yield self._scalar("fioprobe_owner_info", (self.outcome.owner,), 1.0)
        if self.writer is not None:
            yield self._scalar("fioprobe_writer_info", (self.writer,), 1.0)
        if self.push_ids is not None:
            # Whole numbers below 2**53: exact as floats on the wire and in the read-back.
            push_id, basis_id = self.push_ids
            yield self._scalar("fioprobe_push_id", (), float(push_id))
            yield self._scalar("fioprobe_push_basis_id", (), float(basis_id))

    def _last_run(self) -> Iterator[Metric]:
        outcome, result = self.outcome, self.outcome.result
        if result.steps:
            steps = self._family("fioprobe_provision_last_step_duration_seconds")
            assert isinstance(steps, GaugeMetricFamily)
            for timed in result.steps:
                steps.add_metric([timed.step.value], max(timed.seconds, 0.0))
            yield steps
        if result.skipped is not None and outcome.not_counted is None:
            yield self._scalar("fioprobe_provision_skipped_info", (result.skipped,), 1.0)
        else:
            yield self._scalar("fioprobe_provision_success", (), 1.0 if outcome.success else 0.0)
            if result.failure is not None:
                failure = result.failure
                step = failure.step.value if failure.step is not None else ""
                yield self._scalar(
                    "fioprobe_provision_failure_reason_info", (failure.reason.value, step), 1.0
                )
            elif outcome.not_counted is not None:
                yield self._scalar(
                    "fioprobe_provision_failure_reason_info", (outcome.not_counted.value, ""), 1.0
                )
        storage_class = result.storage_class
        if storage_class is not None:
            yield self._scalar(
                "fioprobe_provision_info",
                (provisioner_label(storage_class.provisioner), storage_class.volume_type,
                 storage_class.mode.value),
                1.0,
            )  # fmt: skip
        yield self._scalar("fioprobe_provision_last_run_timestamp_seconds", (), outcome.finished_at)
        yield self._scalar("fioprobe_provision_objects_left", (), float(len(result.left)))

    def _totals(self, totals: GroupTotals) -> Iterator[Metric]:
        histogram = self._family(STEP_HISTOGRAM)
        assert isinstance(histogram, HistogramMetricFamily)
        for step in Step:  # in the steps' order, whatever order the totals were kept in
            kept = totals.histograms.get(step.value)
            if kept is None:
                continue
            cumulative, running = [], 0
            for count in kept.counts:
                running += count
                cumulative.append(float(running))
            histogram.add_metric([step.value], list(zip(_LE_LABELS, cumulative, strict=True)),
                                 kept.sum_seconds)  # fmt: skip
        if histogram.samples:
            yield histogram
        for key, name in PROVISION_SCHEMA.counters:
            yield self._scalar(name, (), float(totals.count(key)))
        if totals.last_success_timestamp is not None:
            yield self._scalar(PROVISION_SCHEMA.last_success, (), totals.last_success_timestamp)

    def _family(self, name: str) -> Metric:
        return metric_family(name)

    def _scalar(self, name: str, values: tuple[str, ...], value: float) -> Metric:
        """A counter or gauge of the table with one sample (its labels' `values`)."""
        family = self._family(name)
        if not isinstance(family, CounterMetricFamily | GaugeMetricFamily):
            raise TypeError(f"{name} is not a counter or gauge in the metric table")
        family.add_metric(list(values), value)
        return family


def registry_for_provision(
    outcome: ProvisionOutcome,
    totals: GroupTotals | None,
    writer: str | None = None,
    push_ids: tuple[int, int] | None = None,
) -> CollectorRegistry:
    """A fresh registry holding only this group's families (never the process defaults)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProvisionCollector(outcome, totals, writer, push_ids))
    return registry
