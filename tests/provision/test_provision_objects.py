"""Reading the objects' JSON (StorageClass, claim, pod, volume, VolumeAttachment, Event,
watch events) strictly by type and leniently by presence, their timestamps with their
resolution, and the cross-check of the watch's step ends against those timestamps.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fioprobe.provision.attach import AttachmentState, read_attachment
from fioprobe.provision.cross_check import Clock, Stamp, cross_check, stamps_of
from fioprobe.provision.events import read_event
from fioprobe.provision.objects import (
    CEPH_RBD,
    EBS_DEFAULTS,
    EBS_TYPES,
    UNKNOWN,
    Mode,
    Run,
    provisioner_label,
    read_claim,
    read_pod,
    read_storage_class,
    read_volume,
    volume_type,
)
from fioprobe.provision.observations import Change, WatchFailed, read_watch_event
from fioprobe.provision.shape import ShapeError
from fioprobe.provision.steps import Step, StepTime, Timeline
from fioprobe.provision.timestamps import KubeTime, parse_time
from support.provision_fixtures import (
    SCENARIOS,
    Scenario,
    attachments_of_the_deletion,
    catalog,
    scenario,
)

EBS = "ebs-gp3-wait-for-first-consumer"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("2025-06-03T09:14:05Z", KubeTime(1748942045.0, 1.0)),
        ("2025-06-03T11:14:05+02:00", KubeTime(1748942045.0, 1.0)),
        ("2025-06-03T09:14:05.200000Z", KubeTime(1748942045.2, 1e-6)),
        ("2025-06-03T09:14:05.5Z", KubeTime(1748942045.5, 0.1)),
    ],
)
def test_a_time_keeps_its_resolution(value: object, expected: KubeTime | None) -> None:
    parsed = parse_time(value, "t")
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None and parsed.resolution == expected.resolution
        assert parsed.posix == pytest.approx(expected.posix, abs=1e-6)


@pytest.mark.parametrize("value", ["2025-06-03 09:14:05Z", "2025-06-03T09:14:05", 1748942045,
                                   "2025-13-03T09:14:05Z", "2025-06-03T09:14:05.Z"])  # fmt: skip
def test_a_time_that_is_not_rfc3339_is_a_shape_error(value: object) -> None:
    with pytest.raises(ShapeError, match=r"metadata\.creationTimestamp"):
        parse_time(value, "metadata.creationTimestamp")


def test_a_storage_class_gives_its_binding_mode_and_reclaim() -> None:
    raw = scenario(EBS).raw["storageClass"]
    info = read_storage_class(raw)
    assert (info.name, info.provisioner, info.mode, info.deletes_volumes) == (
        "gp3", "ebs.csi.aws.com", Mode.WAIT_FOR_FIRST_CONSUMER, True,
    )  # fmt: skip
    unset = {k: v for k, v in raw.items() if k not in ("volumeBindingMode", "reclaimPolicy")}
    assert read_storage_class(unset).mode is Mode.IMMEDIATE  # the API's default
    assert read_storage_class(unset).deletes_volumes
    assert not read_storage_class({**raw, "reclaimPolicy": "Retain"}).deletes_volumes
    with pytest.raises(ShapeError, match="volumeBindingMode 'Later' is unknown"):
        read_storage_class({**raw, "volumeBindingMode": "Later"})


#: (provisioner, parameters.type, the volume type fioprobe_provision_info names).
VOLUME_TYPES_OF_CLASSES = [
    ("ebs.csi.aws.com", "gp3", "gp3"),
    ("ebs.csi.aws.com", "IO2", "io2"),  # the driver takes any case
    ("ebs.csi.aws.com", "sc1", "sc1"),
    ("ebs.csi.aws.com", None, "gp3"),  # the CSI driver's default
    ("kubernetes.io/aws-ebs", None, "gp2"),  # the in-tree plugin's
    ("kubernetes.io/aws-ebs", "st1", "st1"),
    ("ebs.csi.aws.com", "standard", "unknown"),  # magnetic: not a type of the closed set
    ("ebs.csi.aws.com", "gp3 ", "unknown"),
    ("rbd.csi.ceph.com", None, "ceph-rbd"),
    ("openshift-storage.rbd.csi.ceph.com", None, "ceph-rbd"),  # ODF
    ("kubernetes.io/rbd", "gp3", "ceph-rbd"),  # the type is EBS's parameter, not Ceph's
    ("xrbd.csi.ceph.com", None, "unknown"),  # a suffix only after a dot
    ("cephfs.csi.ceph.com", None, "unknown"),
    ("rancher.io/local-path", "gp3", "unknown"),
    ("example.com/ebs.csi.aws.com", "gp3", "unknown"),
]


@pytest.mark.parametrize(("provisioner", "named", "expected"), VOLUME_TYPES_OF_CLASSES)
def test_a_classs_volume_type_from_its_provisioner_and_type(
    provisioner: str, named: str | None, expected: str
) -> None:
    assert volume_type(provisioner, named) == expected
    raw = {"metadata": {"name": "c"}, "provisioner": provisioner}
    if named is not None:
        raw["parameters"] = {"type": named, "encrypted": "true"}
    assert read_storage_class(raw).volume_type == expected


def test_the_volume_types_named_are_the_one_tables() -> None:
    """What this pure model names (it cannot import the table, a layer above it) is held
    equal to the volume types' one table: every type the mapping gives has a model."""
    from fioprobe.target.volumes import VOLUME_TYPES

    assert [*EBS_TYPES, CEPH_RBD, UNKNOWN] == list(VOLUME_TYPES)
    assert set(EBS_DEFAULTS.values()) <= set(EBS_TYPES)
    given = {expected for _, _, expected in VOLUME_TYPES_OF_CLASSES}
    assert given == set(VOLUME_TYPES) - {"io1"}  # every type but one is reached above


def test_the_fixtures_classes_have_their_types() -> None:
    assert read_storage_class(scenario(EBS).raw["storageClass"]).volume_type == "gp3"
    ceph = scenario("ceph-rbd-immediate").raw["storageClass"]
    assert read_storage_class(ceph).volume_type == "ceph-rbd"
    with pytest.raises(ShapeError, match=r"parameters\.type is int, not a string"):
        read_storage_class({**ceph, "parameters": {"type": 3}})


@pytest.mark.parametrize(
    "provisioner",
    ["ebs.csi.aws.com", "kubernetes.io/aws-ebs", "openshift-storage.rbd.csi.ceph.com",
     "rancher.io/local-path", "Example.COM/My_Driver.v2", "a", "x" * 63,
     "p" * 253 + "/" + "n" * 63],
)  # fmt: skip
def test_a_provisioner_of_the_apis_shape_is_its_own_label(provisioner: str) -> None:
    assert provisioner_label(provisioner) == provisioner


@pytest.mark.parametrize(
    "provisioner",
    ["", "x" * 64, "p" * 254 + "/n", "a/b/c", "-lead", "trail-", "new\nline", "sp ace",
     'quo"te', "ünï", "/name", "prefix/", "a..b/c", "\ud800", "x" * 100_000],
)  # fmt: skip
def test_any_other_provisioner_is_a_short_hash(provisioner: str) -> None:
    """Written by whoever may create a StorageClass: never its text in the label."""
    label = provisioner_label(provisioner)
    assert len(label) == 8 and set(label) <= set("0123456789abcdef")
    assert label != provisioner_label(provisioner + "x")


def test_a_claim_a_pod_and_a_volume_as_the_run_sees_them() -> None:
    case = scenario(EBS)
    bound = read_claim(case.raw["provisioning"][5]["object"])
    assert (bound.phase, bound.volume_name, bound.selected_node) == (
        "Bound", "pvc-9a8b7c6d-1e2f-4a3b-8c5d-6e7f8a9b0c1d", "ip-10-0-1-23.ec2.internal",
    )  # fmt: skip
    pod = read_pod(case.raw["provisioning"][-1]["object"])
    assert pod.scheduled and pod.node_name == "ip-10-0-1-23.ec2.internal"
    assert pod.writer is not None and (pod.writer.run, pod.writer.exit_code) == (Run.TERMINATED, 0)
    assert pod.writer.finished == KubeTime(1748942060.0, 1.0)
    waiting = read_pod(case.raw["provisioning"][1]["object"])
    assert (waiting.scheduled, waiting.writer, waiting.phase) == (False, None, "Pending")
    volume = read_volume(case.raw["provisioning"][4]["object"])
    assert (volume.phase, volume.csi_driver) == ("Bound", "ebs.csi.aws.com")
    assert volume.claim is not None and volume.claim.name == "fioprobe-prov-gp3-7f3k2"
    local = read_volume(scenario(SCENARIOS[2]).raw["provisioning"][4]["object"])
    assert local.csi_driver is None  # a hostPath volume


def test_an_unschedulable_pod_keeps_the_schedulers_words() -> None:
    raw = copy.deepcopy(scenario(EBS).raw["provisioning"][1]["object"])
    raw["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": "2025-06-03T09:14:05Z",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 node(s) had volume node affinity conflict.",
        }
    ]
    pod = read_pod(raw)
    assert not pod.scheduled and pod.scheduled_at is None
    assert (
        pod.unschedulable == "0/3 nodes are available: 3 node(s) had volume node affinity conflict."
    )


def test_a_volume_attachment_with_its_attach_error() -> None:
    """attachError as the external-attacher writes it: a message and a time; the errorCode
    only with its feature gate, read when there."""
    raw = scenario(EBS).raw["provisioning"][9]["object"]
    va = read_attachment(raw)
    assert (va.attacher, va.volume_name, va.node_name, va.attached) == (
        "ebs.csi.aws.com", "pvc-9a8b7c6d-1e2f-4a3b-8c5d-6e7f8a9b0c1d",
        "ip-10-0-1-23.ec2.internal", False,
    )  # fmt: skip
    assert va.attach_error is not None and va.detach_error is None
    assert va.attach_error.at == KubeTime(1748942051.0, 1.0)
    assert va.attach_error.code is None
    coded = copy.deepcopy(raw)
    coded["status"]["attachError"]["errorCode"] = 13  # gRPC INTERNAL
    coded_error = read_attachment(coded).attach_error
    assert coded_error is not None and coded_error.code == 13
    attached = read_attachment(scenario(EBS).raw["provisioning"][10]["object"])
    assert attached.attached and attached.attach_error is None and not attached.detached


def test_a_detach_is_the_attachment_deleted_or_unpublished_while_deleted() -> None:
    asked, gone = attachments_of_the_deletion(scenario(EBS))
    assert (asked["type"], gone["type"]) == ("MODIFIED", "DELETED")
    deleting = read_attachment(asked["object"])
    assert deleting.meta.deleting and deleting.attached and not deleting.detached
    assert read_attachment(gone["object"]).detached  # what the DELETED event carried
    unpublished = copy.deepcopy(asked["object"])
    unpublished["status"] = {"attached": False}
    assert read_attachment(unpublished).detached
    unpublished["status"]["detachError"] = {"message": "timed out", "time": "2025-06-03T09:19:01Z"}
    assert not read_attachment(unpublished).detached


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("status", "attached"), "true", "status.attached is str, not a boolean"),
        (("status", "attachError"), "boom", "status.attachError is str, not an object"),
        (("spec", "source"), ["pvc-1"], "spec.source is list, not an object"),
        (("spec", "nodeName"), None, "spec.nodeName is missing"),
    ],
)
def test_a_field_of_the_wrong_type_is_a_shape_error(
    path: tuple[str, str], value: object, match: str
) -> None:
    raw: dict[str, Any] = copy.deepcopy(scenario(EBS).raw["provisioning"][9]["object"])
    raw[path[0]][path[1]] = value
    with pytest.raises(ShapeError, match=match):
        read_attachment(raw)


def test_a_pod_whose_conditions_are_not_a_list_is_a_shape_error() -> None:
    raw = copy.deepcopy(scenario(EBS).raw["provisioning"][-1]["object"])
    raw["status"]["conditions"] = {"type": "PodScheduled"}
    with pytest.raises(ShapeError, match=r"status\.conditions is not a list of objects"):
        read_pod(raw)


def test_watch_events() -> None:
    raw = scenario(EBS).raw["deletion"][-1]
    observation = read_watch_event(raw["at"], raw)
    assert observation is not None and observation.change is Change.DELETED and observation.gone
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}
    assert read_watch_event(1.0, bookmark) is None
    expired = {
        "type": "ERROR",
        "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "too old resource version: 881200 (881950)", "reason": "Expired",
                   "code": 410},
    }  # fmt: skip
    with pytest.raises(WatchFailed, match=r"Expired \(too old resource version"):
        read_watch_event(1.0, expired)
    with pytest.raises(ShapeError, match="which no step follows"):
        read_watch_event(1.0, {"type": "ADDED", "object": {"kind": "Node", "metadata": {}}})


def test_events_of_both_recorders() -> None:
    """The scheduler's (newer events API: eventTime in microseconds, the old fields null) and
    the kubelet's (firstTimestamp, lastTimestamp, count in whole seconds)."""
    events = catalog("events.json")
    scheduler = read_event(events["scheduling failed, volume node affinity"])
    assert scheduler.component == "default-scheduler"
    assert scheduler.first is not None and scheduler.first.resolution == 1e-6
    assert scheduler.first.posix == pytest.approx(1748942045.402113, abs=1e-6)
    assert scheduler.first == scheduler.last and scheduler.count == 1
    attach = read_event(events["attach failed"])
    assert (attach.count, attach.component, attach.involved.kind) == (
        9, "attachdetach-controller", "Pod",
    )  # fmt: skip
    assert attach.first == KubeTime(1748942174.0, 1.0)
    assert attach.last == KubeTime(1748942671.0, 1.0)


# --- the cross-check ---------------------------------------------------------------------


def all_stamps(case: Scenario) -> list[Stamp]:
    mode = case.storage_class.mode
    found = [s for o in (*case.provisioning, *case.deletion) for s in stamps_of(mode, o.state)]
    return found + [s for e in case.events for s in stamps_of(mode, e)]


def provisioned(case: Scenario) -> Timeline:
    timeline = Timeline.provisioning(case.storage_class.mode, case.start, case.objects)
    for observation in case.provisioning:
        timeline.observe(observation)
    return timeline


#: The steps each fixture's objects carry a time for.
STAMPED = {
    "ebs-gp3-wait-for-first-consumer": {"created", "bound", "attached", "running", "written"},
    "ceph-rbd-immediate": {"created", "bound", "scheduled", "attached", "running", "written"},
    "local-path-wait-for-first-consumer": {"created", "bound", "running", "written"},
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_fixtures_watch_agrees_with_their_objects(name: str) -> None:
    case = scenario(name)
    stamps = all_stamps(case)
    assert {s.step.value for s in stamps} == STAMPED[name]
    assert cross_check(provisioned(case).finished, stamps, case.clock) == []


def test_a_clock_that_is_off_is_reported_never_used() -> None:
    """The node that wrote the writer's startedAt runs 3 s ahead: reported, and the step's
    duration stays the watch's."""
    case = scenario(EBS)
    timeline = provisioned(case)
    before = timeline.durations()
    ahead = [
        Stamp(s.step, KubeTime(s.at.posix + 3.0, s.at.resolution), s.source)
        if s.step is Step.RUNNING else s
        for s in all_stamps(case)
    ]  # fmt: skip
    [found] = cross_check(timeline.finished, ahead, case.clock)
    assert (found.step, found.source) == (Step.RUNNING, "writer startedAt")
    assert found.difference == pytest.approx(-1.98)
    assert "before the writer startedAt says it happened" in found.what
    assert timeline.durations() == before


def test_a_late_delivery_is_reported() -> None:
    """Every delivery 2.5 s late (a watch that lags): each direct step end is beyond 1 s
    plus the second's rounding from its object's time."""
    case = scenario(EBS)
    late = Clock(case.clock.monotonic, case.clock.wall + 2.5)
    found = cross_check(provisioned(case).finished, all_stamps(case), late)
    assert [d.step.value for d in found] == ["created", "bound", "attached", "running", "written"]
    assert all("late delivery" in d.what for d in found)


def test_an_end_shown_by_a_later_step_is_only_an_upper_bound() -> None:
    clock = Clock(100.0, 1000.0)
    stamp = Stamp(Step.ATTACHED, KubeTime(990.0, 1.0), "event SuccessfulAttachVolume")
    shown = StepTime(Step.ATTACHED, 50.0, 95.0, direct=False)  # 995 on the wall
    assert cross_check([shown], [stamp], clock) == []
    seen = StepTime(Step.ATTACHED, 50.0, 95.0, direct=True)
    assert [d.step for d in cross_check([seen], [stamp], clock)] == [Step.ATTACHED]
    after = Stamp(Step.ATTACHED, KubeTime(997.0, 1.0), "event SuccessfulAttachVolume")
    assert [d.step for d in cross_check([shown], [after], clock)] == [Step.ATTACHED]


def test_the_allowance_is_one_second_plus_the_fields_rounding() -> None:
    clock = Clock(0.0, 0.0)
    end = StepTime(Step.RUNNING, 0.0, 10.0, direct=True)

    def disagrees(stamp: float, resolution: float) -> bool:
        return bool(
            cross_check([end], [Stamp(Step.RUNNING, KubeTime(stamp, resolution), "t")], clock)
        )

    assert not disagrees(8.0 + 1e-9, 1.0)  # 1.999 s after a whole second: rounding + 1 s
    assert disagrees(7.99, 1.0)
    assert not disagrees(9.0 - 1e-9 + 0.000001, 1e-6)
    assert disagrees(8.99, 1e-6)  # a microsecond time has no second of rounding
    assert not disagrees(11.0, 1.0) and disagrees(11.01, 1.0)


def test_deliveries_of_other_kinds_carry_no_stamp_of_their_own() -> None:
    case = scenario(EBS)
    attachments = [o.state for o in case.provisioning if isinstance(o.state, AttachmentState)]
    assert attachments and all(stamps_of(Mode.IMMEDIATE, a) == [] for a in attachments)
