"""Why a provisioning run failed: one reason of a closed set, from Kubernetes' own words.

Each reason comes from something a component wrote: an Event's reason (the table below), a
VolumeAttachment's attachError or detachError, a container's state, a PersistentVolume's
phase, or the API's refusal of the probe's own request (an HTTP status and the Status
object's reason). Most of these are retried by their component (a provisioner tries again, the
scheduler requeues, the kubelet remounts), so a warning alone does not fail a run: a run fails
when its step passes its deadline or the API refuses a request, and `explain` then names the
reason from the warnings that belong to that step (the latest one), or `deadline` when none
does. The message is kept, printable and bounded, for the log; it is never a label.

The set is closed: a Warning event of a reason not in the table is `other`, never its own
string, so that alerts and runbooks can list every value. Normal events say nothing failed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fioprobe.provision.attach import AttachmentState
from fioprobe.provision.events import Event
from fioprobe.provision.objects import PodState, Run, VolumeState
from fioprobe.provision.shape import message
from fioprobe.provision.steps import Step


class Reason(enum.StrEnum):
    """The `reason` label of a failed provisioning run."""

    #: The claim got no volume: the provisioner's ProvisioningFailed, the binder's FailedBinding.
    PROVISIONING_FAILED = "provisioning_failed"
    #: The scheduler found no node for the pod (FailedScheduling).
    SCHEDULING_FAILED = "scheduling_failed"
    #: The attach failed (FailedAttachVolume, or the VolumeAttachment's attachError).
    ATTACH_FAILED = "attach_failed"
    #: The volume is still attached to another node (FailedAttachVolume's Multi-Attach error).
    MULTI_ATTACH = "multi_attach"
    #: The kubelet could not mount the volume into the pod (FailedMount).
    MOUNT_FAILED = "mount_failed"
    #: The kubelet could not pull, create or start the writer's container: not the volume.
    CONTAINER_FAILED = "container_failed"
    #: The writer ran and exited non-zero: the write or the fdatasync through the mount failed.
    WRITE_FAILED = "write_failed"
    #: The detach failed (the VolumeAttachment's detachError, FailedDetachVolume).
    DETACH_FAILED = "detach_failed"
    #: The provisioner could not delete the volume (the volume Failed, VolumeFailedDelete).
    VOLUME_DELETE_FAILED = "volume_delete_failed"
    #: The API refused a create: a ResourceQuota of the namespace is used up (403).
    QUOTA_EXCEEDED = "quota_exceeded"
    #: The API refused a request otherwise (403: RBAC, Pod Security admission, a LimitRange).
    FORBIDDEN = "forbidden"
    #: The API refused an object of the probe's as invalid (422).
    INVALID = "invalid"
    #: Any other failed request: unreachable, a timeout, a conflict, a server error.
    API_ERROR = "api_error"
    #: A step passed its deadline and no warning of that step says why.
    DEADLINE = "deadline"
    #: A Warning event of a reason not listed above.
    OTHER = "other"


#: Warning event reasons and what they mean for a run. Sources (kubernetes/kubernetes):
#: pkg/controller/volume/events/event.go (ProvisioningFailed, FailedBinding,
#: VolumeFailedDelete, also the external-provisioner's), pkg/kubelet/events/event.go
#: (FailedAttachVolume, FailedDetachVolume, FailedMount, FailedMapVolume and the container
#: reasons), the scheduler's FailedScheduling.
EVENT_REASONS: dict[str, Reason] = {
    "ProvisioningFailed": Reason.PROVISIONING_FAILED,
    "FailedBinding": Reason.PROVISIONING_FAILED,
    "FailedScheduling": Reason.SCHEDULING_FAILED,
    "FailedAttachVolume": Reason.ATTACH_FAILED,
    "FailedMount": Reason.MOUNT_FAILED,
    "FailedMapVolume": Reason.MOUNT_FAILED,
    "Failed": Reason.CONTAINER_FAILED,
    "BackOff": Reason.CONTAINER_FAILED,
    "ErrImageNeverPull": Reason.CONTAINER_FAILED,
    "InspectFailed": Reason.CONTAINER_FAILED,
    "FailedCreatePodSandBox": Reason.CONTAINER_FAILED,
    "FailedCreatePodContainer": Reason.CONTAINER_FAILED,
    "FailedDetachVolume": Reason.DETACH_FAILED,
    "VolumeFailedDelete": Reason.VOLUME_DELETE_FAILED,
}
#: The attach/detach controller's words when the volume is attached to another node, in a
#: FailedAttachVolume event: "Multi-Attach error for volume ..." and, as newer releases word
#: the same event, "Waiting for detach for volume ..." (docs/PROVISIONING.md, its sources).
MULTI_ATTACH_MARKERS = ("Multi-Attach error", "Waiting for detach")
#: A container's waiting reasons that mean it will not start without help.
CONTAINER_WAITING_FAILURES = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
#: The warnings that can explain a deadline in each step. A mount's failure while the attach
#: seems pending is the mount's report of an attach not done, so `running` takes both.
STEP_REASONS: dict[Step, frozenset[Reason]] = {
    Step.CREATED: frozenset(),
    Step.SCHEDULED: frozenset({Reason.SCHEDULING_FAILED}),
    Step.BOUND: frozenset({Reason.PROVISIONING_FAILED, Reason.SCHEDULING_FAILED}),
    Step.ATTACHED: frozenset({Reason.ATTACH_FAILED, Reason.MULTI_ATTACH, Reason.MOUNT_FAILED}),
    Step.RUNNING: frozenset(
        {Reason.ATTACH_FAILED, Reason.MULTI_ATTACH, Reason.MOUNT_FAILED, Reason.CONTAINER_FAILED}
    ),
    Step.WRITTEN: frozenset({Reason.WRITE_FAILED, Reason.CONTAINER_FAILED}),
    Step.POD_DELETED: frozenset(),
    Step.DETACHED: frozenset({Reason.DETACH_FAILED}),
    Step.VOLUME_DELETED: frozenset({Reason.VOLUME_DELETE_FAILED}),
}


@dataclass(frozen=True)
class Signal:
    """One statement from the cluster that something failed."""

    reason: Reason
    #: Who said it, and where: "event FailedMount (kubelet)", "HTTP 403 Forbidden".
    source: str
    message: str


@dataclass(frozen=True)
class Failure:
    """Why a run failed, in the step it failed in (None: a request outside the steps)."""

    reason: Reason
    step: Step | None
    source: str
    message: str


def event_signal(event: Event) -> Signal | None:
    """What a Warning event says failed; None for a Normal one."""
    if not event.warning:
        return None
    reason = EVENT_REASONS.get(event.reason, Reason.OTHER)
    if reason is Reason.ATTACH_FAILED and any(m in event.message for m in MULTI_ATTACH_MARKERS):
        reason = Reason.MULTI_ATTACH
    who = f" ({event.component})" if event.component else ""
    return Signal(reason, f"event {message(event.reason, 80)}{who}", event.message)


def api_error_signal(status: int | None, body: Mapping[str, Any] | None) -> Signal:
    """What the API's refusal of a request says: its HTTP `status` (None when no answer
    came) and its body, a Status object ({"kind": "Status", "reason": ..., "message":
    ..., "code": ...}) when the API server wrote it."""
    status_object = body if body is not None and body.get("kind") == "Status" else {}
    # The error path reads leniently: a refusal whose body is odd is still a refusal.
    reason, words = status_object.get("reason"), status_object.get("message")
    said = reason if isinstance(reason, str) else ""
    said_message = message(words if isinstance(words, str) else None)
    source = f"HTTP {status} {message(said, 60)}".rstrip() if status else "no answer"
    if status == 403 and "exceeded quota" in said_message:
        return Signal(Reason.QUOTA_EXCEEDED, source, said_message)
    if status == 403:
        return Signal(Reason.FORBIDDEN, source, said_message)
    if status == 422 or said == "Invalid":
        return Signal(Reason.INVALID, source, said_message)
    return Signal(Reason.API_ERROR, source, said_message)


def attachment_signal(va: AttachmentState) -> Signal | None:
    """The attacher's last error on the run's VolumeAttachment, if any."""
    if va.detach_error is not None:
        error = va.detach_error
        return Signal(Reason.DETACH_FAILED, "VolumeAttachment status.detachError", error.message)
    if va.attach_error is not None and not va.attached:
        error = va.attach_error
        return Signal(Reason.ATTACH_FAILED, "VolumeAttachment status.attachError", error.message)
    return None


def pod_signal(pod: PodState) -> Signal | None:
    """What the writer container's state says failed, if anything."""
    writer = pod.writer
    if writer is None:
        return None
    if writer.run is Run.TERMINATED and writer.exit_code not in (None, 0):
        said = f"exit code {writer.exit_code}" + (f" ({writer.reason})" if writer.reason else "")
        return Signal(
            Reason.WRITE_FAILED, "the writer container", f"{said}: {writer.message}".rstrip(": ")
        )
    if writer.run is Run.WAITING and writer.reason in CONTAINER_WAITING_FAILURES:
        return Signal(
            Reason.CONTAINER_FAILED, f"the writer container ({writer.reason})", writer.message
        )
    return None


def volume_signal(volume: VolumeState) -> Signal | None:
    """A volume in phase Failed: its reclaim (the deletion) failed."""
    if volume.phase == "Failed":
        return Signal(Reason.VOLUME_DELETE_FAILED, "PersistentVolume phase Failed", volume.message)
    return None


def explain(step: Step | None, signals: Sequence[Signal], waited: float) -> Failure:
    """Why a run whose `step` passed its deadline after `waited` seconds failed: the latest
    signal that belongs to that step, else `deadline` (naming the latest other warning, if
    any, for the log)."""
    belongs = STEP_REASONS.get(step, frozenset()) if step is not None else frozenset()
    for signal in reversed(signals):
        if signal.reason in belongs:
            return Failure(signal.reason, step, signal.source, signal.message)
    what = f"step {step} not done after {waited:.0f}s" if step else f"not done after {waited:.0f}s"
    if signals:
        last = signals[-1]
        what += f"; the latest warning: {last.source}: {last.message}"
    return Failure(Reason.DEADLINE, step, "the probe's deadline", message(what))


def refused(step: Step | None, signal: Signal) -> Failure:
    """A run that ends at once because the API refused its request (a create, a delete)."""
    return Failure(signal.reason, step, signal.source, signal.message)
