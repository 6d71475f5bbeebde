"""Failure reasons from Kubernetes' own words: Events, the API's refusals, the states of a
VolumeAttachment, a container and a volume, and which of them explains a step that passed
its deadline. The set is closed, and docs/PROVISIONING.md lists exactly it and the steps.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import pytest
from conftest import REPO
from fioprobe.provision.attach import AttachmentState, read_attachment
from fioprobe.provision.events import read_event
from fioprobe.provision.objects import read_pod, read_volume
from fioprobe.provision.reasons import (
    EVENT_REASONS,
    STEP_REASONS,
    Reason,
    Signal,
    api_error_signal,
    attachment_signal,
    event_signal,
    explain,
    pod_signal,
    refused,
    volume_signal,
)
from fioprobe.provision.steps import Step, Timeline
from fioprobe.text import printable
from support.provision_fixtures import attachments_of_the_deletion, catalog, scenario

EVENTS = catalog("events.json")
API_ERRORS = catalog("api-errors.json")

#: What each Event of events.json says failed (None: nothing, a Normal event).
EVENT_TABLE: dict[str, Reason | None] = {
    "multi-attach, exclusively attached": Reason.MULTI_ATTACH,
    "multi-attach, used by a pod": Reason.MULTI_ATTACH,
    "multi-attach, newer wording": Reason.MULTI_ATTACH,
    "attach failed": Reason.ATTACH_FAILED,
    "provisioning failed, cloud limit": Reason.PROVISIONING_FAILED,
    "provisioning failed, class missing": Reason.PROVISIONING_FAILED,
    "binding failed": Reason.PROVISIONING_FAILED,
    "scheduling failed, volume node affinity": Reason.SCHEDULING_FAILED,
    "scheduling failed, unbound immediate claim": Reason.SCHEDULING_FAILED,
    "mount failed, format": Reason.MOUNT_FAILED,
    "mount failed, timed out": Reason.MOUNT_FAILED,
    "image pull failed": Reason.CONTAINER_FAILED,
    "image pull back-off": Reason.CONTAINER_FAILED,
    "volume delete failed": Reason.VOLUME_DELETE_FAILED,
    "unknown warning": Reason.OTHER,
    "normal, known": None,
    "normal, unknown": None,
}

#: What each refusal of api-errors.json is.
API_TABLE: dict[str, Reason] = {
    "quota, claim": Reason.QUOTA_EXCEEDED,
    "quota, pods": Reason.QUOTA_EXCEEDED,
    "rbac": Reason.FORBIDDEN,
    "pod security": Reason.FORBIDDEN,
    "invalid": Reason.INVALID,
    "already exists": Reason.API_ERROR,
    "too many requests": Reason.API_ERROR,
    "bad gateway, not a Status": Reason.API_ERROR,
    "no answer": Reason.API_ERROR,
}


def test_the_tables_cover_the_fixtures() -> None:
    assert set(EVENT_TABLE) == set(EVENTS)
    assert set(API_TABLE) == set(API_ERRORS)


@pytest.mark.parametrize("name", EVENT_TABLE)
def test_an_event_maps_to_its_reason(name: str) -> None:
    event = read_event(EVENTS[name])
    signal = event_signal(event)
    expected = EVENT_TABLE[name]
    if expected is None:
        assert signal is None
        return
    assert signal is not None and signal.reason is expected
    assert signal.source.startswith(f"event {event.reason}")
    assert signal.message == printable(EVENTS[name]["message"], 400)


def test_multi_attach_is_its_own_reason_only_inside_failed_attach_volume() -> None:
    """The same words in another event are that event's reason: a FailedMount that quotes
    a Multi-Attach error is a mount failure."""
    raw = copy.deepcopy(EVENTS["mount failed, timed out"])
    raw["message"] = 'Multi-Attach error for volume "pvc-1" quoted by the kubelet'
    signal = event_signal(read_event(raw))
    assert signal is not None and signal.reason is Reason.MOUNT_FAILED


def test_an_unknown_warning_is_the_catch_all_never_its_own_string() -> None:
    for reason in ("VolumeConditionAbnormal", "SomethingNew", "x" * 300):
        raw = copy.deepcopy(EVENTS["unknown warning"])
        raw["reason"] = reason
        signal = event_signal(read_event(raw))
        assert signal is not None and signal.reason is Reason.OTHER
        assert signal.reason.value == "other"


@pytest.mark.parametrize("name", API_TABLE)
def test_an_api_refusal_maps_to_its_reason(name: str) -> None:
    entry: dict[str, Any] = API_ERRORS[name]
    signal = api_error_signal(entry["status"], entry["body"])
    assert signal.reason is API_TABLE[name]
    if entry["body"] is not None:
        assert signal.message == entry["body"]["message"]
        assert signal.source == f"HTTP {entry['status']} {entry['body']['reason']}"


def test_an_odd_refusal_body_is_still_a_refusal() -> None:
    """The error path reads leniently: a 403 whose Status has a number for a message."""
    signal = api_error_signal(403, {"kind": "Status", "message": 7, "reason": ["Forbidden"]})
    assert (signal.reason, signal.source, signal.message) == (Reason.FORBIDDEN, "HTTP 403", "")


def test_messages_are_one_printable_bounded_line() -> None:
    raw = copy.deepcopy(EVENTS["mount failed, format"])
    raw["message"] = "first line\nforged line \x1b[2J" + "x" * 1000
    signal = event_signal(read_event(raw))
    assert signal is not None
    assert "\n" not in signal.message and "\x1b" not in signal.message
    assert signal.message.startswith("first line forged line \\x1b[2J")
    assert len(signal.message) == 400


def test_the_attachers_errors_from_the_volume_attachment() -> None:
    """EBS: the attachError the external-attacher wrote before the attach succeeded; and a
    detachError while the attachment is being deleted."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    states = [o.state for o in case.provisioning if isinstance(o.state, AttachmentState)]
    assert [attachment_signal(s) is None for s in states] == [True, False, True]
    failing = attachment_signal(states[1])
    assert failing is not None and failing.reason is Reason.ATTACH_FAILED
    assert failing.message.startswith("rpc error: code = Internal desc = Could not attach volume")
    raw = copy.deepcopy(attachments_of_the_deletion(case)[0]["object"])  # asked to go, attached
    raw["status"]["detachError"] = {
        "message": 'rpc error: code = Internal desc = Could not detach volume "vol-0a1b2c3d4e5f'
        '67890" from node "i-0123456789abcdef0": timed out waiting for the volume to detach',
        "time": "2025-06-03T09:19:01Z",
    }
    detaching = attachment_signal(read_attachment(raw))
    assert detaching is not None and detaching.reason is Reason.DETACH_FAILED


def writer_state(state: dict[str, Any]) -> dict[str, Any]:
    """The EBS run's pod with its writer container in `state`."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    raw = copy.deepcopy(case.raw["provisioning"][-1]["object"])
    raw["status"]["initContainerStatuses"][0]["state"] = state
    return raw


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ({"terminated": {"exitCode": 0, "reason": "Completed"}}, None),
        ({"running": {"startedAt": "2025-06-03T09:14:19Z"}}, None),
        ({"waiting": {"reason": "PodInitializing"}}, None),
        ({"waiting": {"reason": "ContainerCreating"}}, None),
        (
            {"terminated": {"exitCode": 1, "reason": "Error",
                            "message": "dd: error writing '/data/probe': Input/output error"}},
            Reason.WRITE_FAILED,
        ),
        (
            {"waiting": {"reason": "ImagePullBackOff",
                         "message": 'Back-off pulling image "docker.io/library/busybox:1.36.1"'}},
            Reason.CONTAINER_FAILED,
        ),
        ({"waiting": {"reason": "CreateContainerConfigError"}}, Reason.CONTAINER_FAILED),
    ],
)  # fmt: skip
def test_the_writer_containers_state(state: dict[str, Any], reason: Reason | None) -> None:
    signal = pod_signal(read_pod(writer_state(state)))
    assert (signal.reason if signal else None) is reason
    if reason is Reason.WRITE_FAILED:
        assert signal is not None
        assert (
            signal.message
            == "exit code 1 (Error): dd: error writing '/data/probe': Input/output error"
        )


def test_a_volume_whose_deletion_failed() -> None:
    case = scenario("ebs-gp3-wait-for-first-consumer")
    raw = copy.deepcopy(case.raw["deletion"][-1]["object"])
    assert volume_signal(read_volume(raw)) is None
    raw["status"] = {
        "phase": "Failed",
        "message": 'Error deleting EBS volume "vol-0a1b2c3d4e5f67890" since volume is currently '
        'attached to "i-0123456789abcdef0"',
    }
    signal = volume_signal(read_volume(raw))
    assert signal is not None and signal.reason is Reason.VOLUME_DELETE_FAILED


def signals(*names: str) -> list[Signal]:
    found = [event_signal(read_event(EVENTS[name])) for name in names]
    return [s for s in found if s is not None]


@pytest.mark.parametrize(
    ("step", "names", "reason"),
    [
        (Step.SCHEDULED, ["scheduling failed, volume node affinity"], Reason.SCHEDULING_FAILED),
        (Step.BOUND, ["provisioning failed, cloud limit"], Reason.PROVISIONING_FAILED),
        (Step.BOUND, ["scheduling failed, unbound immediate claim", "binding failed"],
         Reason.PROVISIONING_FAILED),
        (Step.ATTACHED, ["attach failed", "multi-attach, exclusively attached"],
         Reason.MULTI_ATTACH),
        (Step.ATTACHED, ["multi-attach, newer wording", "attach failed"], Reason.ATTACH_FAILED),
        (Step.RUNNING, ["mount failed, format"], Reason.MOUNT_FAILED),
        (Step.RUNNING, ["image pull failed", "normal, known"], Reason.CONTAINER_FAILED),
        (Step.DETACHED, [], Reason.DEADLINE),
        (Step.VOLUME_DELETED, ["volume delete failed"], Reason.VOLUME_DELETE_FAILED),
        # A warning of another step, or of no step, does not explain this one.
        (Step.SCHEDULED, ["provisioning failed, cloud limit"], Reason.DEADLINE),
        (Step.WRITTEN, ["unknown warning"], Reason.DEADLINE),
    ],
)  # fmt: skip
def test_a_deadline_is_explained_by_the_latest_warning_of_its_step(
    step: Step, names: list[str], reason: Reason
) -> None:
    failure = explain(step, signals(*names), waited=300.0)
    assert (failure.reason, failure.step) == (reason, step)


def test_a_plain_deadline_says_which_step_and_the_latest_warning() -> None:
    failure = explain(Step.WRITTEN, signals("unknown warning"), waited=300.4)
    assert failure.source == "the probe's deadline"
    assert failure.message.startswith(
        "step written not done after 300s; the latest warning: event FailedKillPod (kubelet): "
    )


def test_a_run_stuck_on_a_multi_attach() -> None:
    """The EBS run, the volume still attached to another node: the VolumeAttachment for
    this node never gets attached, the attach/detach controller says why."""
    case = scenario("ebs-gp3-wait-for-first-consumer")
    timeline = Timeline.provisioning(case.storage_class.mode, case.start, case.objects)
    for observation in case.provisioning[:8]:
        timeline.observe(observation)
    assert timeline.current is Step.ATTACHED
    seen = [event_signal(e) for e in case.events]
    warnings = [s for s in seen if s is not None]
    assert warnings == []  # the run's own events are all Normal
    warnings = signals("multi-attach, exclusively attached")
    failure = explain(timeline.current, warnings, timeline.elapsed(5304.110))
    assert failure.reason is Reason.MULTI_ATTACH
    assert failure.message.startswith('Multi-Attach error for volume "pvc-9a8b7c6d')


def test_a_run_whose_claim_is_refused_fails_at_once() -> None:
    entry = API_ERRORS["quota, claim"]
    failure = refused(Step.CREATED, api_error_signal(entry["status"], entry["body"]))
    assert (failure.reason, failure.step, failure.source) == (
        Reason.QUOTA_EXCEEDED, Step.CREATED, "HTTP 403 Forbidden",
    )  # fmt: skip
    assert "exceeded quota: fioprobe-provision" in failure.message


# --- the closed sets ----------------------------------------------------------------------


def test_the_reasons_are_a_closed_set_of_label_values() -> None:
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", r.value) for r in Reason)
    assert set(EVENT_REASONS.values()) <= set(Reason)
    assert set(STEP_REASONS) == set(Step)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", s.value) for s in Step)


def doc_table(heading: str) -> list[str]:
    """The backticked first column of the table under `heading` in docs/PROVISIONING.md."""
    text = (REPO / "docs" / "PROVISIONING.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


def test_the_design_lists_every_reason_and_every_step_and_no_other() -> None:
    assert doc_table("Failure reasons") == [r.value for r in Reason]
    assert doc_table("Steps") == [s.value for s in Step]


def test_a_signal_keeps_its_words_apart_from_its_reason() -> None:
    """The message is for the log, never a label: replacing it changes no reason."""
    signal = signals("attach failed")[0]
    assert replace(signal, message="anything").reason is signal.reason
