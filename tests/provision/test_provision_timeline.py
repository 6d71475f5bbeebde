"""The provisioning timeline on whole runs: each binding mode's steps from the watch deliveries
of tests/data/provision, steps that do not apply absent (not zero), deliveries out of order
across the watches, states going back, and the durations adding up to the wall time for any
delivery order.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from typing import Any

import pytest
from fioprobe.provision.attach import AttachmentState
from fioprobe.provision.objects import ClaimState, Mode, PodState
from fioprobe.provision.observations import Change, Observation
from fioprobe.provision.steps import (
    DELETION,
    PROVISIONING,
    Step,
    StepTime,
    Timeline,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from support.provision_fixtures import SCENARIOS, Scenario, observations, scenario

#: Per scenario: the provisioning steps (step, seconds, seen directly), then the deletion's,
#: then the steps absent in each. Read off the fixtures' delivery times by hand.
Steps = list[tuple[str, float, bool]]
EXPECTED: dict[str, tuple[Steps, Steps, set[str], set[str]]] = {
    "ebs-gp3-wait-for-first-consumer": (
        [
            ("created", 0.058, True),  # the pod's ADDED (the claim came 27 ms before it)
            ("scheduled", 0.347, True),  # the claim's selected-node annotation
            ("bound", 3.496, True),  # EBS CreateVolume, the PV, the claim Bound
            ("attached", 8.399, True),  # one attachError on the way
            ("running", 2.520, True),  # mount, image, the writer started
            ("written", 0.820, True),  # the writer exited 0
        ],
        [("pod_deleted", 3.380, True), ("detached", 12.750, True), ("volume_deleted", 1.770, True)],
        set(),
        set(),
    ),
    "ceph-rbd-immediate": (
        [
            ("created", 0.022, True),
            ("bound", 1.240, True),
            ("scheduled", 0.056, True),  # the pod, created once the claim was bound
            ("attached", 0.322, True),
            ("running", 1.770, True),
            ("written", 0.695, True),
        ],
        [("pod_deleted", 1.585, True), ("detached", 0.632, True), ("volume_deleted", 0.793, True)],
        set(),
        set(),
    ),
    "local-path-wait-for-first-consumer": (
        [
            ("created", 0.027, True),
            ("scheduled", 0.054, True),
            ("bound", 2.552, True),
            # The kubelet reported the writer only once it had exited: its start is shown by
            # that delivery, not seen, and written takes no time of the watch's.
            ("running", 0.557, False),
            ("written", 0.000, True),
        ],
        [("pod_deleted", 0.800, True), ("volume_deleted", 2.490, True)],
        {"attached"},
        {"detached"},
    ),
}


def run(case: Scenario, provisioning: tuple[Observation, ...] | None = None) -> Timeline:
    timeline = Timeline.provisioning(case.storage_class.mode, case.start, case.objects)
    for observation in case.provisioning if provisioning is None else provisioning:
        timeline.observe(observation)
    return timeline


def table(steps: tuple[StepTime, ...]) -> list[tuple[str, float, bool]]:
    return [(t.step.value, round(t.seconds, 3), t.direct) for t in steps]


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_binding_mode_takes_its_steps_in_its_order(name: str) -> None:
    case = scenario(name)
    provisioned, deleted, absent, absent_deleting = EXPECTED[name]
    timeline = run(case)
    assert timeline.done and timeline.current is None
    assert table(timeline.finished) == provisioned
    assert {s.value for s in timeline.absent} == absent
    assert [t.step for t in timeline.finished] == [
        s for s in PROVISIONING[case.storage_class.mode] if s.value not in absent
    ]
    assert timeline.notes == ()

    deletion = timeline.deletion(timeline.finished[-1].end, pod_created=True)
    for observation in case.deletion:
        deletion.observe(observation)
    assert deletion.done
    assert table(deletion.finished) == deleted
    assert {s.value for s in deletion.absent} == absent_deleting
    assert deletion.notes == ()
    # The run's wall time, from its start to the PV gone, is the sum of every step.
    total = sum(t.seconds for t in (*timeline.finished, *deletion.finished))
    assert total == pytest.approx(deletion.finished[-1].end - case.start)


def test_the_binding_modes_and_the_deletion_have_the_orders_of_the_design() -> None:
    assert PROVISIONING[Mode.IMMEDIATE] == (
        Step.CREATED, Step.BOUND, Step.SCHEDULED, Step.ATTACHED, Step.RUNNING, Step.WRITTEN,
    )  # fmt: skip
    assert PROVISIONING[Mode.WAIT_FOR_FIRST_CONSUMER] == (
        Step.CREATED, Step.SCHEDULED, Step.BOUND, Step.ATTACHED, Step.RUNNING, Step.WRITTEN,
    )  # fmt: skip
    assert DELETION == (Step.POD_DELETED, Step.DETACHED, Step.VOLUME_DELETED)


def test_the_attach_step_follows_the_volume_attachment_through_an_attach_error() -> None:
    """EBS: the VolumeAttachment appears (attached false), reports an attachError, then
    attached true: the step is in progress from the claim bound to the last of these."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    timeline = Timeline.provisioning(case.storage_class.mode, case.start, case.objects)
    seen: list[tuple[str, Step | None]] = []
    for observation in case.provisioning:
        timeline.observe(observation)
        if isinstance(observation.state, AttachmentState):
            error = observation.state.attach_error
            seen.append(("error" if error else "no error", timeline.current))
    assert seen == [
        ("no error", Step.ATTACHED),  # created by the attach/detach controller
        ("error", Step.ATTACHED),  # the external-attacher's first try failed
        ("no error", Step.RUNNING),  # attached: the next step is in progress
    ]
    attached = timeline.durations()[Step.ATTACHED]
    assert attached == pytest.approx(12.300 - 3.901)


def test_a_step_not_applicable_is_absent_not_zero() -> None:
    """A driver whose CSIDriver says attachRequired: false (CephFS, NFS) gets no
    VolumeAttachment: the same Ceph run without one has no attach and no detach step at all,
    and the time goes to the step that includes it (running: the mount)."""
    case = scenario("ceph-rbd-immediate")
    without = tuple(o for o in case.provisioning if not isinstance(o.state, AttachmentState))
    timeline = run(case, without)
    assert Step.ATTACHED not in timeline.durations()
    assert timeline.absent == (Step.ATTACHED,)
    assert timeline.durations()[Step.RUNNING] == pytest.approx(3.410 - 1.318)
    deletion = timeline.deletion(timeline.finished[-1].end, pod_created=True)
    for observation in case.deletion:
        if not isinstance(observation.state, AttachmentState):
            deletion.observe(observation)
    assert [t.step for t in deletion.finished] == [Step.POD_DELETED, Step.VOLUME_DELETED]
    assert deletion.done and deletion.absent == (Step.DETACHED,)


def moved(
    observations_: tuple[Observation, ...], index: int, after: int, at: float
) -> tuple[Observation, ...]:
    """The deliveries with the one at `index` delivered right after the one at `after`."""
    items = list(observations_)
    late = replace(items.pop(index), at=at)
    items.insert(after if index < after else after + 1, late)
    return tuple(items)


def test_an_attach_delivered_after_the_pod_runs_ends_no_later_than_that() -> None:
    """The VolumeAttachment watch lags the pod watch: the pod's running container proves the
    attach, which ends there (not seen directly); running itself takes no time; the attach's
    own delivery, later, changes nothing and is noted."""
    case = scenario("ceph-rbd-immediate")
    attached = max(
        i for i, o in enumerate(case.provisioning) if isinstance(o.state, AttachmentState)
    )
    running = next(i for i, o in enumerate(case.provisioning) if o.at == pytest.approx(5003.410))
    order = moved(case.provisioning, attached, running, at=5003.500)
    timeline = run(case, order)
    steps = {t.step: t for t in timeline.finished}
    assert steps[Step.ATTACHED].end == pytest.approx(5003.410)
    assert not steps[Step.ATTACHED].direct
    assert steps[Step.RUNNING].seconds == 0.0 and steps[Step.RUNNING].direct
    assert [(n.step, n.what[:24]) for n in timeline.notes] == [
        (Step.ATTACHED, "its own change arrived 0")
    ]
    assert timeline.wall == pytest.approx(4.105)


def test_a_claim_bound_delivered_after_its_pod_is_scheduled() -> None:
    """WaitForFirstConsumer: the scheduler binds the pod only once its claim is bound, so
    the pod's PodScheduled shows bound, when the claim's own Bound is late."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    claim_bound = next(
        i for i, o in enumerate(case.provisioning)
        if getattr(o.state, "phase", "") == "Bound" and isinstance(o.state, ClaimState)
    )  # fmt: skip
    pod_scheduled = next(
        i for i, o in enumerate(case.provisioning)
        if isinstance(o.state, PodState) and o.state.scheduled
    )  # fmt: skip
    order = moved(case.provisioning, claim_bound, pod_scheduled, at=5004.050)
    timeline = run(case, order)
    bound = timeline.finished[2]
    assert (bound.step, bound.end, bound.direct) == (Step.BOUND, 5004.020, False)
    assert [n.step for n in timeline.notes] == [Step.BOUND]


def without_selected_node(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deliveries of a claim bound by the scheduler to a volume that exists (a static
    local PV): no node is ever written on the claim."""
    kept = []
    for event in copy.deepcopy(raw):
        annotations = event["object"]["metadata"].get("annotations", {})
        if annotations.pop("volume.kubernetes.io/selected-node", None) and (
            event["object"]["status"]["phase"] == "Pending"
        ):
            continue  # the delivery that only wrote the node
        kept.append(event)
    return kept


def test_a_claim_bound_without_a_node_written_shows_scheduled_by_bound() -> None:
    case = scenario("local-path-wait-for-first-consumer")
    timeline = run(case, observations(without_selected_node(case.raw["provisioning"])))
    scheduled, bound = timeline.finished[1], timeline.finished[2]
    assert (scheduled.step, scheduled.direct, bound.step, bound.direct) == (
        Step.SCHEDULED, False, Step.BOUND, True,
    )  # fmt: skip
    assert bound.seconds == 0.0 and scheduled.end == pytest.approx(5002.633)


def test_an_attachment_seen_before_the_volume_is_known_counts_once_it_is() -> None:
    """The VolumeAttachment watch is cluster-wide and the claim watch may lag it: an
    attachment of a volume not known yet is kept, and when the claim names that volume, the
    attach is shown done there."""
    case = scenario("ceph-rbd-immediate")
    by_kind: dict[str, list[Observation]] = {}
    for observation in case.provisioning:
        by_kind.setdefault(type(observation.state).__name__, []).append(observation)
    claim_added, claim_bound = by_kind["ClaimState"][0], by_kind["ClaimState"][-1]
    attached = by_kind["AttachmentState"][-1]
    timeline = Timeline.provisioning(Mode.IMMEDIATE, case.start, case.objects)
    timeline.observe(claim_added)
    assert timeline.observe(replace(attached, at=5001.100)) == ()
    done = timeline.observe(replace(claim_bound, at=5001.200))
    assert [(t.step, t.direct) for t in done] == [
        (Step.BOUND, True), (Step.SCHEDULED, False), (Step.ATTACHED, False),
    ]  # fmt: skip
    assert timeline.current is Step.RUNNING


def test_other_volumes_attachments_and_other_objects_are_not_the_runs() -> None:
    case = scenario("ceph-rbd-immediate")
    timeline = run(case)
    before = timeline.finished
    for observation in case.provisioning:
        state = observation.state
        other_meta = replace(state.meta, name=state.meta.name + "-other")
        other = replace(state, meta=other_meta)
        if isinstance(other, AttachmentState):
            other = replace(other, volume_name="pvc-someone-elses")
        deletion = replace(observation, at=5009.0, change=Change.DELETED, state=other)
        timeline.observe(deletion)
    assert timeline.finished == before and timeline.notes == ()


def test_states_going_back_during_the_run_are_noted() -> None:
    case = scenario("ebs-gp3-wait-for-first-consumer")
    timeline = run(case)
    attachment = next(
        o for o in reversed(case.provisioning) if isinstance(o.state, AttachmentState)
    )
    state = attachment.state
    detached = replace(state, attached=False, meta=replace(state.meta, deleting=True))
    timeline.observe(replace(attachment, at=5016.0, state=detached))
    claim = next(o for o in reversed(case.provisioning) if isinstance(o.state, ClaimState))
    timeline.observe(replace(claim, at=5016.5, state=replace(claim.state, phase="Lost")))
    assert [n.what for n in timeline.notes] == [
        "the volume was detached during the run",
        "the claim is Lost: its volume is gone",
    ]


def test_a_deletion_after_a_failed_provisioning_follows_only_what_exists() -> None:
    """A WaitForFirstConsumer run that failed before its claim was bound: the pod exists,
    no volume, no attachment. The deletion has one step; the claim goes with it."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    timeline = run(case, case.provisioning[:3])
    assert timeline.current is Step.BOUND
    deletion = timeline.deletion(5300.0, pod_created=True)
    assert deletion.current is Step.POD_DELETED
    pod = case.provisioning[1]
    assert deletion.observe(replace(pod, at=5302.5, change=Change.DELETED))[0].seconds == 2.5
    assert deletion.done and deletion.absent == (Step.DETACHED, Step.VOLUME_DELETED)


def test_an_attachment_appearing_after_its_step_was_judged_absent_is_noted() -> None:
    """The local volume's run: running showed the attach absent; a VolumeAttachment of the
    volume arriving afterwards (a watch far behind) changes no step."""
    local = scenario("local-path-wait-for-first-consumer")
    timeline = run(local)
    attachment = next(
        o for o in scenario("ceph-rbd-immediate").provisioning
        if isinstance(o.state, AttachmentState) and o.state.attached
    )  # fmt: skip
    assert isinstance(attachment.state, AttachmentState)
    ours = replace(attachment.state, volume_name=timeline.volume_name)
    before = timeline.finished
    timeline.observe(replace(attachment, at=5010.0, state=ours))
    assert timeline.finished == before and timeline.absent == (Step.ATTACHED,)
    assert [(n.step, n.what) for n in timeline.notes] == [
        (Step.ATTACHED, "its object appeared after a later step; it stays absent")
    ]


def test_deliveries_must_come_in_the_order_they_were_received() -> None:
    case = scenario("ceph-rbd-immediate")
    timeline = run(case, case.provisioning[:3])
    with pytest.raises(ValueError, match="before the one at"):
        timeline.observe(replace(case.provisioning[3], at=case.start))
    with pytest.raises(ValueError, match="the deletion starts at"):
        timeline.deletion(case.start, pod_created=False)


def test_the_step_in_progress_and_its_elapsed_time() -> None:
    case = scenario("ebs-gp3-wait-for-first-consumer")
    timeline = run(case, case.provisioning[:3])
    assert timeline.current is Step.BOUND
    assert timeline.elapsed(5010.405) == pytest.approx(10.0)


# --- any delivery order --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(SCENARIOS),
    order=st.randoms(use_true_random=False),
    gaps=st.lists(st.floats(min_value=0.0, max_value=30.0), min_size=40, max_size=40),
    cut=st.integers(min_value=0, max_value=40),
)
def test_durations_add_up_to_the_wall_time_for_any_delivery_order(
    name: str, order: Any, gaps: list[float], cut: int
) -> None:
    """Whatever order the watches deliver in, whatever the delays, and wherever the run is
    cut short: every duration is >= 0, the steps finish in their mode's order, none is both
    finished and absent, and the durations add up to the time from the start to the last
    step's end, for the provisioning and for the deletion after it."""
    case = scenario(name)
    deliveries = list(case.provisioning + case.deletion)
    order.shuffle(deliveries)
    at = case.start
    timed = []
    for observation, gap in zip(deliveries[:cut], gaps, strict=False):
        at += gap
        timed.append(replace(observation, at=at))
    provisioning = Timeline.provisioning(case.storage_class.mode, case.start, case.objects)
    half = len(timed) // 2
    for observation in timed[:half]:
        provisioning.observe(observation)
    deletion = provisioning.deletion(timed[half - 1].at if half else case.start, True)
    for observation in timed[half:]:
        deletion.observe(observation)
    for timeline in (provisioning, deletion):
        steps = [t.step for t in timeline.finished]
        assert steps == [s for s in timeline.order if s in steps]
        assert not set(steps) & set(timeline.absent)
        assert all(t.seconds >= 0 for t in timeline.finished)
        assert math.isclose(sum(t.seconds for t in timeline.finished), timeline.wall, abs_tol=1e-9)
        ends = [t.end for t in timeline.finished]
        assert ends == sorted(ends)
