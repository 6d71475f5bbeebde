"""What the probe needs of a StorageClass, a PersistentVolumeClaim, a Pod and a
PersistentVolume, read from their JSON (core/v1 and storage.k8s.io/v1) into small frozen
summaries. Field names follow the Kubernetes API reference; a field the API leaves out is
"not set", a field of the wrong type is a `ShapeError` (see shape.py).

The summaries keep each object's own timestamps beside its state: the watch times the steps,
and these times are only the cross-check (cross_check.py).
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fioprobe.provision.shape import (
    ShapeError,
    integer,
    items,
    mapping,
    message,
    required_text,
    text,
)
from fioprobe.provision.timestamps import KubeTime, parse_time

#: The claim annotation the scheduler writes for a WaitForFirstConsumer claim: the node it
#: chose, which the provisioner then provisions for.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The name of the probe pod's container that writes and fdatasyncs through the mount (an
#: init container, so that the pod keeps the volume mounted after it, until deleted).
WRITER = "write"


class Mode(enum.StrEnum):
    """A StorageClass's volumeBindingMode: when its claims are provisioned and bound."""

    #: At once, before any pod uses the claim (the API's default when the field is unset).
    IMMEDIATE = "Immediate"
    #: When the scheduler has placed the first pod that uses the claim, on that pod's node.
    WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


#: The EBS volume types (the EC2 API's VolumeType) fioprobe knows, as a StorageClass's
#: `parameters.type` names them. They, CEPH_RBD and UNKNOWN are names of the volume types'
#: one table (`fioprobe.target.volumes.MODELS`, lib/volume-types.json), which this pure model
#: sits below and cannot import; tests/provision/test_provision_objects.py holds them equal.
EBS_TYPES: tuple[str, ...] = ("gp2", "gp3", "io1", "io2", "st1", "sc1")
CEPH_RBD = "ceph-rbd"
UNKNOWN = "unknown"
#: The EBS provisioners, each with the type it makes when the class names none: the CSI
#: driver's default is gp3, the in-tree plugin's gp2.
EBS_DEFAULTS: dict[str, str] = {"ebs.csi.aws.com": "gp3", "kubernetes.io/aws-ebs": "gp2"}
#: Ceph RBD: the CSI driver (ODF names it `openshift-storage.rbd.csi.ceph.com`, any
#: `<prefix>.rbd.csi.ceph.com`) and the in-tree plugin.
_CEPH_RBD_DRIVER = "rbd.csi.ceph.com"
_CEPH_RBD_IN_TREE = "kubernetes.io/rbd"
#: What the API server takes as a provisioner (a qualified name, as `kubernetes.io/aws-ebs`
#: or `ebs.csi.aws.com`): an optional DNS-subdomain prefix of at most 253 characters and a
#: '/', then a name of at most 63.
_PREFIX = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def volume_type(provisioner: str, type_parameter: str | None) -> str:
    """The volume type of a StorageClass's volumes, one of the volume types' closed set, from
    its provisioner and its `parameters.type` (None when the class sets none).

    EBS (CSI or in-tree): `parameters.type` lower-cased when it is one of EBS_TYPES, the
    driver's default when the class names no type, `unknown` for a type fioprobe does not
    model (magnetic `standard`): naming it gp3 would put a volume of another kind under gp3's
    thresholds. The same reading as the chart's default-class model
    (charts/fioprobe/templates/_helpers.tpl, `fioprobe.volumeOfClass`). Ceph RBD: `ceph-rbd`.
    Anything else: `unknown`.
    """
    if provisioner in EBS_DEFAULTS:
        if not type_parameter:
            return EBS_DEFAULTS[provisioner]
        lowered = type_parameter.lower()
        return lowered if lowered in EBS_TYPES else UNKNOWN
    if provisioner in (_CEPH_RBD_DRIVER, _CEPH_RBD_IN_TREE) or provisioner.endswith(
        "." + _CEPH_RBD_DRIVER
    ):
        return CEPH_RBD
    return UNKNOWN


def provisioner_label(provisioner: str) -> str:
    """A provisioner as a label value, bounded: the name itself when it has the shape the API
    server validates (a qualified name), else a short hash of it, as the probe's objects label
    their class (`workload.labels`). The name comes from the cluster, written by whoever may
    create StorageClasses: it must not bring arbitrary text or length into every push."""
    prefix, slash, name = provisioner.rpartition("/")
    if (
        len(name) <= 63
        and _NAME.fullmatch(name)
        and (not slash or (len(prefix) <= 253 and _PREFIX.fullmatch(prefix.lower())))
    ):
        return provisioner
    return hashlib.sha256(provisioner.encode("utf-8", "surrogatepass")).hexdigest()[:8]


#: The provisioner of a class whose volumes are made by hand (local PersistentVolumes): a claim
#: of it binds one of them, which a run would use up (Retain: Released for good; Delete: Failed,
#: nothing deletes it). Such a class is skipped, as one that retains its volumes.
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(frozen=True)
class StorageClassInfo:
    name: str
    provisioner: str
    mode: Mode
    #: reclaimPolicy Delete (the API's default): the volume goes when the claim goes. A class
    #: that retains its volumes would keep one per run, so the probe does not run on it.
    deletes_volumes: bool
    #: What its volumes are (`volume_type`): the run's default size, the metrics' label.
    volume_type: str = UNKNOWN


def read_storage_class(obj: Mapping[str, Any]) -> StorageClassInfo:
    metadata = mapping(obj, "metadata")
    name = required_text(metadata, "name", "metadata")
    value = text(obj, "volumeBindingMode") or Mode.IMMEDIATE.value
    try:
        mode = Mode(value)
    except ValueError:
        unknown = f"StorageClass {name}: volumeBindingMode {value!r:.60} is unknown"
        raise ShapeError(unknown) from None
    provisioner = required_text(obj, "provisioner")
    named = text(mapping(obj, "parameters"), "type", "parameters")
    return StorageClassInfo(
        name=name,
        provisioner=provisioner,
        mode=mode,
        deletes_volumes=(text(obj, "reclaimPolicy") or "Delete") == "Delete",
        volume_type=volume_type(provisioner, named),
    )


@dataclass(frozen=True)
class Meta:
    """The metadata every summary keeps."""

    namespace: str | None  # None for cluster-scoped objects (PersistentVolume)
    name: str
    uid: str | None
    created: KubeTime | None
    #: metadata.deletionTimestamp is set: deletion was asked for, finalizers still hold it.
    deleting: bool


def read_meta(obj: Mapping[str, Any], kind: str) -> Meta:
    metadata = mapping(obj, "metadata")
    name = required_text(metadata, "name", "metadata")
    where = f"{kind} {name}: metadata"
    return Meta(
        namespace=text(metadata, "namespace", where),
        name=name,
        uid=text(metadata, "uid", where),
        created=parse_time(metadata.get("creationTimestamp"), f"{where}.creationTimestamp"),
        deleting=metadata.get("deletionTimestamp") is not None,
    )


@dataclass(frozen=True)
class ClaimState:
    meta: Meta
    #: status.phase: Pending, Bound or Lost ("" while the API has not set it).
    phase: str
    #: spec.volumeName: the PersistentVolume the claim is (being) bound to.
    volume_name: str | None
    #: The node the scheduler chose (WaitForFirstConsumer), from SELECTED_NODE.
    selected_node: str | None

    @property
    def bound(self) -> bool:
        return self.phase == "Bound"


def read_claim(obj: Mapping[str, Any]) -> ClaimState:
    meta = read_meta(obj, "PersistentVolumeClaim")
    annotations = mapping(mapping(obj, "metadata"), "annotations", "metadata")
    return ClaimState(
        meta=meta,
        phase=text(mapping(obj, "status"), "phase", "status") or "",
        volume_name=text(mapping(obj, "spec"), "volumeName", "spec"),
        selected_node=text(annotations, SELECTED_NODE, "metadata.annotations"),
    )


class Run(enum.StrEnum):
    """Where a container is: the one key of its ContainerState that is set."""

    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"
    #: No status yet (the kubelet has not reported the container).
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ContainerState:
    name: str
    run: Run
    #: waiting.reason or terminated.reason (ContainerCreating, ErrImagePull, Completed...).
    reason: str | None
    message: str
    started: KubeTime | None
    finished: KubeTime | None
    exit_code: int | None


def _container(status: Mapping[str, Any], where: str) -> ContainerState:
    name = required_text(status, "name", where)
    state = mapping(status, "state", where)
    for run in (Run.TERMINATED, Run.RUNNING, Run.WAITING):
        if run.value in state:
            detail = mapping(state, run.value, f"{where}.state")
            at = f"{where}.state.{run.value}"
            return ContainerState(
                name=name,
                run=run,
                reason=text(detail, "reason", at),
                message=message(text(detail, "message", at)),
                started=parse_time(detail.get("startedAt"), f"{at}.startedAt"),
                finished=parse_time(detail.get("finishedAt"), f"{at}.finishedAt"),
                exit_code=integer(detail, "exitCode", at),
            )
    return ContainerState(name, Run.UNKNOWN, None, "", None, None, None)


@dataclass(frozen=True)
class PodState:
    meta: Meta
    #: status.phase: Pending (init containers included), Running, Succeeded, Failed, Unknown.
    phase: str
    #: spec.nodeName: set when the scheduler has bound the pod to a node.
    node_name: str | None
    #: The PodScheduled condition: True once bound to a node (its lastTransitionTime then).
    scheduled: bool
    scheduled_at: KubeTime | None
    #: The PodScheduled condition's message while False (the scheduler's "0/3 nodes are
    #: available: ..."), for the log.
    unschedulable: str
    #: The writer container's state (init or regular container), None before it has one.
    writer: ContainerState | None


def read_pod(obj: Mapping[str, Any], writer: str = WRITER) -> PodState:
    meta = read_meta(obj, "Pod")
    status = mapping(obj, "status")
    scheduled, scheduled_at, unschedulable = False, None, ""
    for index, condition in enumerate(items(status, "conditions", "status")):
        if text(condition, "type") == "PodScheduled":
            where = f"status.conditions[{index}]"
            scheduled = text(condition, "status", where) == "True"
            at = parse_time(condition.get("lastTransitionTime"), f"{where}.lastTransitionTime")
            scheduled_at = at if scheduled else None
            unschedulable = "" if scheduled else message(text(condition, "message", where))
    found = None
    for key in ("initContainerStatuses", "containerStatuses"):
        for index, container in enumerate(items(status, key, "status")):
            if text(container, "name") == writer:
                found = _container(container, f"status.{key}[{index}]")
    return PodState(
        meta=meta,
        phase=text(status, "phase", "status") or "",
        node_name=text(mapping(obj, "spec"), "nodeName", "spec"),
        scheduled=scheduled,
        scheduled_at=scheduled_at,
        unschedulable=unschedulable,
        writer=found,
    )


@dataclass(frozen=True)
class ClaimRef:
    namespace: str | None
    name: str
    uid: str | None


@dataclass(frozen=True)
class VolumeState:
    meta: Meta
    #: status.phase: Pending, Available, Bound, Released or Failed.
    phase: str
    #: status.lastPhaseTransitionTime (Kubernetes 1.29 and later), None before.
    phase_changed: KubeTime | None
    #: status.message: why a phase is what it is (a failed deletion's error).
    message: str
    claim: ClaimRef | None
    #: spec.csi.driver, None for a volume of another kind (local, an in-tree plugin).
    csi_driver: str | None


def read_volume(obj: Mapping[str, Any]) -> VolumeState:
    meta = read_meta(obj, "PersistentVolume")
    spec, status = mapping(obj, "spec"), mapping(obj, "status")
    ref = mapping(spec, "claimRef", "spec")
    name = text(ref, "name", "spec.claimRef")
    return VolumeState(
        meta=meta,
        phase=text(status, "phase", "status") or "",
        phase_changed=parse_time(
            status.get("lastPhaseTransitionTime"), "status.lastPhaseTransitionTime"
        ),
        message=message(text(status, "message", "status")),
        claim=None
        if name is None
        else ClaimRef(text(ref, "namespace", "spec.claimRef"), name, text(ref, "uid")),
        csi_driver=text(mapping(spec, "csi", "spec"), "driver", "spec.csi"),
    )
