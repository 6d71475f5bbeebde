"""The provisioning probe's metric families, from hand-built run results: what a success, a
failure, a skipped class and a run that could not be counted push, and how runs add up.

Each registry is written as the text exposition and read back with prometheus_client's own
parser: what is checked is what a Pushgateway would receive.
"""

from __future__ import annotations

import math

import pytest
from fioprobe.errors import FailureReason
from fioprobe.metrics.provision import (
    OBJECTS_REMOVED,
    PROVISION_SCHEMA,
    STEP_BOUNDS,
    ProvisionOutcome,
    merge_result,
    registry_for_provision,
)
from fioprobe.metrics.table import METRICS_BY_NAME
from fioprobe.metrics.totals import PROBE_SCHEMA, GroupTotals, combine
from fioprobe.provision.objects import Mode, StorageClassInfo
from fioprobe.provision.reasons import Failure, Reason
from fioprobe.provision.runner import RunResult
from fioprobe.provision.steps import Step, StepTime
from fioprobe.provision.workload import RunSpec
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

SPEC = RunSpec(owner="o", storage_class="gp3", namespace="ns", size="1Gi", image="img")
GP3 = StorageClassInfo("gp3", "ebs.csi.aws.com", Mode.IMMEDIATE, True, "gp3")
FINISHED = 1_700_000_000.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _result(
    durations: list[tuple[Step, float]],
    *,
    absent: tuple[Step, ...] = (),
    failure: Failure | None = None,
    skipped: str | None = None,
    left: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
    storage_class: StorageClassInfo | None = GP3,
) -> RunResult:
    steps, at = [], 100.0
    for step, seconds in durations:
        steps.append(StepTime(step, at, at + seconds, True))
        at += seconds
    return RunResult(SPEC, "run1", Mode.IMMEDIATE, tuple(steps), absent, failure, skipped,
                     ("a log line",), left, removed, storage_class)  # fmt: skip


#: An Immediate run on a volume with no VolumeAttachment: attached and detached are absent.
SUCCESS = _result(
    [(Step.CREATED, 0.3), (Step.BOUND, 4.0), (Step.SCHEDULED, 0.2), (Step.RUNNING, 6.0),
     (Step.WRITTEN, 0.5), (Step.POD_DELETED, 2.0), (Step.VOLUME_DELETED, 8.0)],
    absent=(Step.ATTACHED, Step.DETACHED),
)  # fmt: skip
DEADLINE = Failure(Reason.DEADLINE, Step.BOUND, "the probe's deadline", "step bound not done")
FAILED = _result([(Step.CREATED, 0.4)], failure=DEADLINE, left=("claim c",))
NO_CLASS = Failure(Reason.PROVISIONING_FAILED, None, "the StorageClass", "not found")
SKIPPED = _result([], skipped="retain_policy", removed=("pod p", "claim c"))


def _push(outcome: ProvisionOutcome, totals: GroupTotals | None) -> Samples:
    registry = registry_for_provision(outcome, totals, "w1" if totals else None,
                                      (7, 0) if totals else None)  # fmt: skip
    text = generate_latest(registry).decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name in METRICS_BY_NAME or f"{family.name}_total" in METRICS_BY_NAME, (
            family.name
        )
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _run(*results: RunResult) -> tuple[Samples, GroupTotals]:
    """Each result merged in turn into one group's totals; the last one pushed."""
    totals = GroupTotals()
    for result in results:
        merge_result(totals, ProvisionOutcome(result, FINISHED), FINISHED)
    return _push(ProvisionOutcome(results[-1], FINISHED, owner="o"), totals), totals


def _names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_a_success_adds_one_sample_per_finished_step_and_none_for_absent_steps() -> None:
    samples, _ = _run(SUCCESS)
    counted = {dict(labels)["step"]: value for (name, labels), value in samples.items()
               if name == "fioprobe_provision_step_duration_seconds_count"}  # fmt: skip
    assert counted == {"created": 1, "bound": 1, "scheduled": 1, "running": 1, "written": 1,
                       "pod_deleted": 1, "volume_deleted": 1}  # fmt: skip
    bucket = "fioprobe_provision_step_duration_seconds_bucket"
    # 4 s: above the 3 s bucket, in the 5 s one; le is "at or below".
    assert _value(samples, bucket, step="bound", le="3") == 0
    assert _value(samples, bucket, step="bound", le="5") == 1
    assert _value(samples, bucket, step="bound", le="+Inf") == 1
    assert _value(samples, "fioprobe_provision_step_duration_seconds_sum", step="running") == 6.0
    assert len([1 for name, labels in samples if name == bucket
                and dict(labels)["step"] == "bound"]) == len(STEP_BOUNDS)  # fmt: skip
    last = {dict(labels)["step"]: value for (name, labels), value in samples.items()
            if name == "fioprobe_provision_last_step_duration_seconds"}  # fmt: skip
    assert last == pytest.approx({"created": 0.3, "bound": 4.0, "scheduled": 0.2,
                                  "running": 6.0, "written": 0.5, "pod_deleted": 2.0,
                                  "volume_deleted": 8.0})  # fmt: skip
    assert _value(samples, "fioprobe_provision_success") == 1
    assert _value(samples, "fioprobe_provision_runs_total") == 1
    assert _value(samples, "fioprobe_provision_failures_total") == 0
    assert _value(samples, "fioprobe_provision_last_success_timestamp_seconds") == FINISHED
    assert _value(samples, "fioprobe_provision_last_run_timestamp_seconds") == FINISHED
    assert _value(samples, "fioprobe_provision_objects_left") == 0
    assert _value(samples, "fioprobe_owner_info", owner="o") == 1
    assert _value(samples, "fioprobe_writer_info", writer="w1") == 1
    assert _value(samples, "fioprobe_push_id") == 7
    assert "fioprobe_provision_failure_reason_info" not in _names(samples)
    assert "fioprobe_provision_skipped_info" not in _names(samples)


def test_a_failure_names_its_reason_and_step_and_adds_only_the_steps_it_finished() -> None:
    samples, _ = _run(FAILED)
    assert _value(samples, "fioprobe_provision_success") == 0
    reasons = {labels: value for (name, labels), value in samples.items()
               if name == "fioprobe_provision_failure_reason_info"}  # fmt: skip
    assert reasons == {(("reason", "deadline"), ("step", "bound")): 1}
    steps = {dict(labels)["step"] for name, labels in samples
             if name == "fioprobe_provision_step_duration_seconds_count"}  # fmt: skip
    assert steps == {"created"}
    assert _value(samples, "fioprobe_provision_failures_total") == 1
    assert _value(samples, "fioprobe_provision_objects_left") == 1
    assert "fioprobe_provision_last_success_timestamp_seconds" not in _names(samples)


def test_a_failure_outside_the_steps_has_an_empty_step() -> None:
    samples, _ = _run(_result([], failure=NO_CLASS, storage_class=None))
    assert _value(samples, "fioprobe_provision_failure_reason_info",
                  reason="provisioning_failed", step="") == 1  # fmt: skip
    assert "fioprobe_provision_step_duration_seconds_count" not in _names(samples)
    assert "fioprobe_provision_info" not in _names(samples)  # no class was read


def _info(samples: Samples) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (name, labels), value in samples.items()
            if name == "fioprobe_provision_info"}  # fmt: skip


INFO_GP3 = (("binding_mode", "Immediate"), ("provisioner", "ebs.csi.aws.com"),
            ("volume_type", "gp3"))  # fmt: skip


@pytest.mark.parametrize("result", [SUCCESS, FAILED, SKIPPED], ids=["success", "failed", "skipped"])
def test_every_run_or_skip_that_read_its_class_says_what_the_class_is(result: RunResult) -> None:
    samples, _ = _run(result)
    assert _info(samples) == {INFO_GP3: 1}
    assert METRICS_BY_NAME["fioprobe_provision_info"].labels == (
        "provisioner", "volume_type", "binding_mode",
    )  # fmt: skip


def test_the_class_info_follows_the_class_and_bounds_its_provisioner() -> None:
    rbd = StorageClassInfo("rbd", "openshift-storage.rbd.csi.ceph.com",
                           Mode.WAIT_FOR_FIRST_CONSUMER, True, "ceph-rbd")  # fmt: skip
    samples, _ = _run(SUCCESS, _result([], failure=DEADLINE, storage_class=rbd))
    assert _info(samples) == {
        (("binding_mode", "WaitForFirstConsumer"),
         ("provisioner", "openshift-storage.rbd.csi.ceph.com"), ("volume_type", "ceph-rbd")): 1
    }  # fmt: skip
    hostile = StorageClassInfo("x", 'evil"}\nfioprobe_provision_success 1' + "x" * 5000,
                               Mode.IMMEDIATE, True, "unknown")  # fmt: skip
    samples, _ = _run(_result([], failure=DEADLINE, storage_class=hostile))
    ((labels, value),) = _info(samples).items()
    provisioner = dict(labels)["provisioner"]
    assert len(provisioner) == 8 and provisioner not in hostile.provisioner
    assert dict(labels)["volume_type"] == "unknown" and value == 1
    assert _value(samples, "fioprobe_provision_success") == 0


def test_the_reason_is_gone_once_a_run_succeeds_again() -> None:
    samples, _ = _run(FAILED, SUCCESS)
    assert "fioprobe_provision_failure_reason_info" not in _names(samples)
    assert _value(samples, "fioprobe_provision_runs_total") == 2
    assert _value(samples, "fioprobe_provision_failures_total") == 1
    assert _value(samples, "fioprobe_provision_step_duration_seconds_count", step="created") == 2
    assert _value(samples, "fioprobe_provision_step_duration_seconds_count", step="bound") == 1


def test_a_skipped_class_has_no_success_gauge_and_counts_no_run() -> None:
    """Alerts on `fioprobe_provision_success == 0` never see a class left alone on purpose;
    its timestamp still moves, so it is not stale either."""
    samples, totals = _run(SUCCESS, SKIPPED)
    assert _value(samples, "fioprobe_provision_skipped_info", reason="retain_policy") == 1
    assert "fioprobe_provision_success" not in _names(samples)
    assert "fioprobe_provision_failure_reason_info" not in _names(samples)
    assert "fioprobe_provision_last_step_duration_seconds" not in _names(samples)
    assert _value(samples, "fioprobe_provision_runs_total") == 1  # the success before it
    assert _value(samples, "fioprobe_provision_failures_total") == 0
    assert _value(samples, "fioprobe_provision_last_run_timestamp_seconds") == FINISHED
    # What a skipped run removed of earlier runs still counts.
    assert _value(samples, "fioprobe_provision_objects_removed_total") == 2
    assert totals.count(OBJECTS_REMOVED) == 2


def test_a_run_that_could_not_be_counted_is_pushed_as_failing_with_the_probes_reason() -> None:
    outcome = ProvisionOutcome(SUCCESS, FINISHED).failed(FailureReason.STATE_ERROR)
    assert not outcome.success and outcome.failure_reason is FailureReason.STATE_ERROR
    samples = _push(outcome, None)
    assert _value(samples, "fioprobe_provision_success") == 0
    assert _value(samples, "fioprobe_provision_failure_reason_info",
                  reason="state_error", step="") == 1  # fmt: skip
    # Without totals: none of the group's counters, which the push (a POST) leaves alone.
    assert not {n for n in _names(samples) if n.endswith(("_total", "_count", "_bucket"))}


def test_totals_survive_a_state_file_and_a_read_back_of_another_kind_is_refused() -> None:
    _, totals = _run(SUCCESS, FAILED, SKIPPED)
    data = totals.to_json()
    again = GroupTotals.from_json(data, PROVISION_SCHEMA)
    assert again == totals
    with pytest.raises(ValueError, match="objects_removed_total"):
        GroupTotals.from_json(data, PROBE_SCHEMA)  # a fio probe's file holds no such counter
    doubled = combine(again, totals)
    assert doubled.runs_total == 4 and doubled.count(OBJECTS_REMOVED) == 4
    assert doubled.histograms["created"].count == 4
    assert len(doubled.histograms["created"].counts) == len(STEP_BOUNDS)
    assert math.isinf(STEP_BOUNDS[-1])
