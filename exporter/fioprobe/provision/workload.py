"""The objects one provisioning run creates: a claim and a pod that mounts it, labelled so
that the probe, and only the probe, can find and remove them.

Every object carries `OWNER_LABEL` (which probe made it: a deployment may run several) and
`RUN_LABEL` (which run): the next run deletes what a killed run left by the owner label,
never anything without it. Names are unique per run, so a leftover is never taken for the
new run's object.

The pod passes the restricted Pod Security standard (non-root, no privilege escalation, no
capability, the runtime's seccomp profile, a read-only root filesystem), mounts no service
account token, and runs two fixed commands, neither taken from configuration: the init
container `write` writes 8 KiB through the mount and fdatasyncs them (`dd conv=fdatasync`),
and `hold` keeps the volume mounted until the pod is deleted, so that the deletion measures
a real unmount and detach. Its grace period is 1 s: nothing in it needs more.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import Any

from fioprobe.provision.objects import WRITER, StorageClassInfo
from fioprobe.provision.steps import RunObjects

#: The probe that made an object (its name: the CronJob's or the command's --owner).
OWNER_LABEL = "fioprobe.io/provision-owner"
#: The run that made it.
RUN_LABEL = "fioprobe.io/provision-run"
#: The slot it was made for: its class and node, hashed (a label value has 63 characters).
#: One slot's runs follow each other, so what carries the owner's and the slot's labels at a
#: run's start was left by a run that died.
SLOT_LABEL = "fioprobe.io/provision-slot"
#: The StorageClass it was made for (to read leftovers per class in logs; never selected on
#: alone).
CLASS_LABEL = "fioprobe.io/provision-class"
MANAGED_BY = {"app.kubernetes.io/managed-by": "fioprobe"}
#: Where the pod mounts the volume, and the file the writer writes there.
MOUNT_PATH = "/volume"
WRITE_FILE = f"{MOUNT_PATH}/fioprobe-provision"
#: The writer's command: 8 KiB of zeroes through the mount, then fdatasync (coreutils' dd,
#: in the fioprobe image). A fixed list, never built from configuration.
WRITE_COMMAND = ("dd", "if=/dev/zero", f"of={WRITE_FILE}", "bs=8192", "count=1",
                 "conv=fdatasync")  # fmt: skip
HOLD_COMMAND = ("sleep", "infinity")
#: The fioprobe image's own user.
RUN_AS = 65532
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$")
#: A claim's size as the API takes it: digits, an optional fraction, and a binary or
#: decimal suffix (no exponent, no sign, no space; "K" is not one of Kubernetes' suffixes).
_SIZE = re.compile(r"^([0-9]{1,15})(?:\.([0-9]{1,9}))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_SIZE_SCALE = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
               "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
               "Ei": 2**60}  # fmt: skip
#: The smallest claim a run asks for: below a MiB no provisioner makes a volume one can
#: format. The largest: 64 TiB, the largest EBS volume (io2 Block Express).
MIN_SIZE_BYTES = 2**20
MAX_SIZE_BYTES = 64 * 2**40
#: A run's claim size when none is given: the smallest volume of the class's type, which costs
#: least and which the provisioner must still accept (EBS refuses a smaller one: the EC2
#: API's minimum VolumeSize, docs/PROVISIONING.md "Cost per run"). A Ceph RBD image is thin.
SMALLEST: dict[str, str] = {"gp2": "1Gi", "gp3": "1Gi", "io1": "4Gi", "io2": "4Gi",
                            "st1": "125Gi", "sc1": "125Gi"}  # fmt: skip
#: Every other type's: a GiB, which any provisioner makes.
SMALLEST_OTHERWISE = "1Gi"


@dataclass(frozen=True)
class RunSpec:
    """What a run of one StorageClass (on one node, for a node-bound class) is asked for."""

    owner: str
    storage_class: str
    namespace: str
    #: The claim's size, as a Kubernetes quantity ("1Gi"); None: the class's smallest volume
    #: (`smallest_size`), known once the run has read the class.
    size: str | None
    #: The image whose dd and sleep the pod runs (the probe's own).
    image: str
    #: The node the pod must run on (a class bound to nodes), or None: the scheduler's choice.
    node: str | None = None
    #: Whether the pod names its user, group and fsGroup (the image's user). False where the
    #: platform assigns them from the namespace's range and refuses a pod that names others
    #: (OpenShift's restricted-v2); runAsNonRoot stays either way.
    pin_ids: bool = True


def label_value_problem(value: str) -> str | None:
    """Why `value` cannot be a label value (63 characters, alphanumeric at both ends, '-',
    '_' and '.' between), or None."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"{value!r:.80} is not a Kubernetes label value (at most 63 characters: letters, "
            "digits, '-', '_', '.', starting and ending with a letter or digit)"
        )
    return None


def namespace_problem(value: str) -> str | None:
    """Why `value` cannot be a namespace's name (a DNS label), or None."""
    if not _DNS_LABEL.match(value):
        return (
            f"{value!r:.80} is not a namespace name (at most 63 characters: lower-case "
            "letters, digits and '-', starting and ending with a letter or digit)"
        )
    return None


def size_problem(value: str) -> str | None:
    """Why `value` cannot be the run's claim size (a Kubernetes quantity of whole bytes from
    1Mi to 64Ti, "1Gi", "500M"), or None."""
    match = _SIZE.match(value)
    if not match:
        return (
            f"{value!r:.80} is not a Kubernetes quantity of bytes (digits and a suffix: "
            "Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E; e.g. 1Gi)"
        )
    whole, fraction, suffix = match.groups()
    scale = _SIZE_SCALE[suffix]
    digits = fraction or ""
    size = int(whole) * scale + int(digits or "0") * scale // 10 ** len(digits)
    if digits and int(digits) * scale % 10 ** len(digits):
        return f"{value!r:.80} is not a whole number of bytes"
    if not MIN_SIZE_BYTES <= size <= MAX_SIZE_BYTES:
        return f"{value!r:.80} is not from 1Mi to 64Ti"
    return None


def smallest_size(volume_type: str) -> str:
    """The smallest claim a class of `volume_type` provisions (`SMALLEST`)."""
    return SMALLEST.get(volume_type, SMALLEST_OTHERWISE)


def sized(spec: RunSpec, storage_class: StorageClassInfo) -> RunSpec:
    """`spec` with its claim size: the one asked for, or the class's smallest volume."""
    if spec.size is not None:
        return spec
    return replace(spec, size=smallest_size(storage_class.volume_type))


def slot_of(spec: RunSpec) -> str:
    """The slot's label value: its class and node, hashed."""
    return hashlib.sha256(f"{spec.storage_class}/{spec.node or ''}".encode()).hexdigest()[:16]


def run_objects(spec: RunSpec, run_id: str) -> RunObjects:
    """The names of the run's claim and pod: a DNS label of the class (cut, with the slot's
    hash to keep it unique) and the run's id."""
    digest = slot_of(spec)[:6]
    stem = re.sub(r"[^a-z0-9-]", "-", spec.storage_class.lower())[:24].strip("-") or "class"
    name = f"fioprobe-prov-{stem}-{digest}-{run_id}"
    return RunObjects(namespace=spec.namespace, claim=name, pod=name)


def labels(spec: RunSpec, run_id: str) -> dict[str, str]:
    digest = hashlib.sha256(spec.storage_class.encode()).hexdigest()[:8]
    shown = spec.storage_class if label_value_problem(spec.storage_class) is None else digest
    return {**MANAGED_BY, OWNER_LABEL: spec.owner, RUN_LABEL: run_id, SLOT_LABEL: slot_of(spec),
            CLASS_LABEL: shown}  # fmt: skip


def claim(spec: RunSpec, run_id: str) -> dict[str, Any]:
    names = run_objects(spec, run_id)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": names.claim, "namespace": spec.namespace,
                     "labels": labels(spec, run_id)},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": spec.storage_class,
            "resources": {"requests": {"storage": spec.size or SMALLEST_OTHERWISE}},
        },
    }  # fmt: skip


def pod(spec: RunSpec, run_id: str) -> dict[str, Any]:
    names = run_objects(spec, run_id)
    container_security = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    resources = {"requests": {"cpu": "10m", "memory": "16Mi"},
                 "limits": {"cpu": "100m", "memory": "32Mi"}}  # fmt: skip
    mount = [{"name": "volume", "mountPath": MOUNT_PATH}]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": names.pod, "namespace": spec.namespace,
                     "labels": labels(spec, run_id)},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {
                "runAsNonRoot": True,
                **({"runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS}
                   if spec.pin_ids else {}),
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "initContainers": [
                {"name": WRITER, "image": spec.image, "imagePullPolicy": "IfNotPresent",
                 "command": list(WRITE_COMMAND), "securityContext": container_security,
                 "resources": resources, "volumeMounts": mount},
            ],
            "containers": [
                {"name": "hold", "image": spec.image, "imagePullPolicy": "IfNotPresent",
                 "command": list(HOLD_COMMAND), "securityContext": container_security,
                 "resources": resources, "volumeMounts": mount},
            ],
            "volumes": [{"name": "volume",
                         "persistentVolumeClaim": {"claimName": names.claim}}],
        },
    }  # fmt: skip
    if spec.node is not None:
        # Node affinity, never spec.nodeName: a pod with a node name skips the scheduler, and
        # a WaitForFirstConsumer claim then never gets its node.
        body["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In",
                                          "values": [spec.node]}]}
                    ]
                }
            }
        }  # fmt: skip
    return body
