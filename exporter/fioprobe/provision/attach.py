"""VolumeAttachment objects (storage.k8s.io/v1): whether the probe's volume is attached to its
node, or detached from it, and the attacher's last error.

The attach/detach controller creates a VolumeAttachment when a pod that uses a CSI volume is
scheduled, if the driver needs an attach (its CSIDriver's attachRequired, true when unset);
the driver's external-attacher sets status.attached when ControllerPublishVolume has
succeeded, and status.attachError with a message and a time when it has failed (it retries).
A detach is the VolumeAttachment deleted: the controller asks for the deletion, the
external-attacher unpublishes the volume and removes its finalizer (status.detachError when
that fails). A volume whose driver needs no attach, or a local volume, has no
VolumeAttachment at all: its attach and detach steps are absent, not zero (steps.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fioprobe.provision.objects import Meta, read_meta
from fioprobe.provision.shape import flag, integer, mapping, message, required_text, text
from fioprobe.provision.timestamps import KubeTime, parse_time


@dataclass(frozen=True)
class VolumeError:
    """status.attachError or status.detachError: the attacher's last failure."""

    message: str
    at: KubeTime | None
    #: The gRPC code of the failure (errorCode, set only with a feature gate on), else None.
    code: int | None


@dataclass(frozen=True)
class AttachmentState:
    meta: Meta
    #: spec.attacher: the CSI driver's name.
    attacher: str
    #: spec.source.persistentVolumeName; None for an inline volume (not the probe's).
    volume_name: str | None
    #: spec.nodeName: the node the volume is attached to.
    node_name: str
    attached: bool
    attach_error: VolumeError | None
    detach_error: VolumeError | None

    @property
    def detached(self) -> bool:
        """Unpublished and about to go: deletion was asked for and the attacher reports the
        volume no longer attached, without an error. (The object disappearing, a DELETED
        watch event, says the same; whichever the watch delivers first ends the step.)"""
        return self.meta.deleting and not self.attached and self.detach_error is None


def _error(status: Mapping[str, Any], key: str) -> VolumeError | None:
    if status.get(key) is None:
        return None
    where = f"status.{key}"
    error = mapping(status, key, "status")
    return VolumeError(
        message=message(text(error, "message", where)),
        at=parse_time(error.get("time"), f"{where}.time"),
        code=integer(error, "errorCode", where),
    )


def read_attachment(obj: Mapping[str, Any]) -> AttachmentState:
    meta = read_meta(obj, "VolumeAttachment")
    spec, status = mapping(obj, "spec"), mapping(obj, "status")
    return AttachmentState(
        meta=meta,
        attacher=required_text(spec, "attacher", "spec"),
        volume_name=text(mapping(spec, "source", "spec"), "persistentVolumeName", "spec.source"),
        node_name=required_text(spec, "nodeName", "spec"),
        attached=flag(status, "attached", "status"),
        attach_error=_error(status, "attachError"),
        detach_error=_error(status, "detachError"),
    )
