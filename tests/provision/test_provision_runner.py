"""A provisioning run against a real kube-apiserver (`support.kubeapi`): RBAC on, the probe's
namespace under the restricted Pod Security standard, the service account allowed exactly
what docs/PROVISIONING.md lists.

This API server runs no controllers, no scheduler and no kubelet: nothing provisions, binds,
schedules or deletes past the API. That is the world of a stopped provisioner or scheduler,
so the runs here fail at the step that waits on them, with `deadline`, and say so; the
whole path, with a real provisioner and kubelet, is the e2e's (tests/e2e). What is checked
here: the objects the run creates (admitted under restricted Pod Security, labelled), which
step fails and why, what a class that keeps its volumes or does not exist does, and that
the next run removes what a killed run left, and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from fioprobe.provision.reasons import Reason
from fioprobe.provision.runner import ProvisionRun, RunResult
from fioprobe.provision.steps import Step
from fioprobe.provision.workload import OWNER_LABEL, SLOT_LABEL, pod, slot_of
from support import kubeapi, provision_api, services
from support.provision_api import NAMESPACE, OWNER, Cluster

pytestmark = pytest.mark.slow

kube_apiserver = kubeapi.kube_apiserver


@pytest.fixture(scope="module")
def cluster(kube_apiserver: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    return provision_api.prepare(kube_apiserver, tmp_path_factory)


def test_immediate_with_no_provisioner_fails_in_bound_and_never_makes_the_pod(
    cluster: Cluster,
) -> None:
    run = ProvisionRun(cluster.client(), cluster.spec("nowhere-immediate"),
                       deadlines={Step.BOUND: 3.0})  # fmt: skip
    result = run.execute()
    assert result.failure is not None, result.log
    assert (result.failure.reason, result.failure.step) == (Reason.DEADLINE, Step.BOUND)
    assert result.failure.message.startswith("step bound not done after 3s")
    assert [t.step for t in result.steps] == [Step.CREATED]
    assert result.steps[0].direct and 0 < result.steps[0].seconds < 30
    assert result.skipped is None and not result.success
    assert run.objects.pod not in cluster.names("pods")  # Immediate: no pod before Bound
    assert run.objects.claim not in cluster.names("pvc")  # deleted (its finalizer may hold it)
    assert "failed in bound: deadline: step bound not done after 3s" in result.log


def test_wait_for_first_consumer_admits_the_restricted_pod_and_fails_in_scheduled(
    cluster: Cluster,
) -> None:
    """The pod is created at once and admitted under restricted Pod Security (a refusal
    would end the run as `forbidden`); with no scheduler it is never placed. Deleted before
    it was scheduled, it is gone at once: the deletion's first step is timed."""
    run = ProvisionRun(cluster.client(), cluster.spec("nowhere-wait", node="node-1"),
                       deadlines={Step.SCHEDULED: 3.0})  # fmt: skip
    result = run.execute()
    assert result.failure is not None, result.log
    assert (result.failure.reason, result.failure.step) == (Reason.DEADLINE, Step.SCHEDULED), (
        "\n".join(result.log)
    )
    assert [t.step for t in result.steps] == [Step.CREATED, Step.POD_DELETED], (
        result.absent,
        result.log,
    )
    assert result.left == ()
    assert run.objects.pod not in cluster.names("pods")
    created, deleted = result.steps
    # The deletion starts at the failure, not at the last delivery before it: the deadline's
    # wait belongs to no step.
    assert deleted.start - created.end >= 3.0
    assert 0 < deleted.seconds < 30


def test_a_pod_that_pins_no_ids_is_admitted_as_restricted_too(cluster: Cluster) -> None:
    """Where the platform assigns the user and fsGroup (OpenShift), the pod names none and
    keeps runAsNonRoot: restricted Pod Security admits it as well (the run fails only where
    nothing schedules it)."""
    spec = dataclasses.replace(cluster.spec("nowhere-wait", node="node-1"), pin_ids=False)
    context = pod(spec, "r1")["spec"]["securityContext"]
    assert context == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    pinned = pod(cluster.spec("nowhere-wait"), "r1")["spec"]["securityContext"]
    assert (pinned["runAsUser"], pinned["runAsGroup"], pinned["fsGroup"]) == (65532,) * 3
    result = ProvisionRun(cluster.client(), spec, deadlines={Step.SCHEDULED: 3.0}).execute()
    assert result.failure is not None, result.log
    assert (result.failure.reason, result.failure.step) == (Reason.DEADLINE, Step.SCHEDULED), (
        "\n".join(result.log)
    )


def test_a_class_that_keeps_its_volumes_is_skipped_and_nothing_is_made(cluster: Cluster) -> None:
    before = cluster.names("pvc")
    result = ProvisionRun(cluster.client(), cluster.spec("kept")).execute()
    assert (result.skipped, result.failure, result.steps) == ("retain_policy", None, ())
    assert cluster.names("pvc") == before


def test_a_class_without_a_dynamic_provisioner_is_skipped_and_nothing_is_made(
    cluster: Cluster,
) -> None:
    """Its volumes are made by hand (local PersistentVolumes): a claim would take one for good,
    whatever its reclaim policy, so the class is skipped as one that retains its volumes."""
    handmade = provision_api.storage_class("handmade", "WaitForFirstConsumer", "Delete")
    cluster.kube.apply({**handmade, "provisioner": "kubernetes.io/no-provisioner"})
    before = cluster.names("pvc")
    result = ProvisionRun(cluster.client(), cluster.spec("handmade")).execute()
    assert (result.skipped, result.failure, result.steps) == ("no_provisioner", None, ())
    assert result.started is None
    assert cluster.names("pvc") == before


def test_a_class_that_does_not_exist_fails_before_any_object(cluster: Cluster) -> None:
    before = cluster.names("pvc")
    result = ProvisionRun(cluster.client(), cluster.spec("no-such-class")).execute()
    assert result.failure is not None
    assert (result.failure.reason, result.failure.step) == (Reason.PROVISIONING_FAILED, None)
    assert result.failure.message == 'StorageClass "no-such-class" not found'
    assert result.storage_class is None  # nothing read: no fioprobe_provision_info
    assert cluster.names("pvc") == before


def _requested_size(cluster: Cluster, run: ProvisionRun) -> tuple[str, RunResult]:
    """Run `run` (it fails in bound: nothing provisions here) while reading its claim as
    the API server holds it: the claim's requested storage, and the run's result."""
    seen: list[str] = []

    def read() -> bool:
        got = cluster.kube.kubectl("get", "pvc", run.objects.claim, "-n", NAMESPACE,
                                   "-o", "jsonpath={.spec.resources.requests.storage}")  # fmt: skip
        if got.returncode == 0 and got.stdout:
            seen.append(got.stdout)
        return bool(seen)

    reader = threading.Thread(
        target=services.wait_for, args=(read,), kwargs={"timeout": 30, "what": "the claim"}
    )
    reader.start()
    result = run.execute()
    reader.join()
    assert result.failure is not None and result.failure.step is Step.BOUND, result.log
    assert seen, result.log
    return seen[0], result


@pytest.mark.parametrize(
    ("parameters", "size", "volume_type"),
    [({"type": "io2", "iops": "100"}, "4Gi", "io2"), ({"type": "st1"}, "125Gi", "st1"),
     ({}, "1Gi", "gp3"), ({"type": "standard"}, "1Gi", "unknown")],
)  # fmt: skip
def test_without_a_size_the_claim_is_the_classs_smallest_volume(
    cluster: Cluster, parameters: dict[str, str], size: str, volume_type: str
) -> None:
    """EBS refuses a volume below its type's minimum: the claim asks for exactly that; a size
    given is taken as it is."""
    name = f"ebs-{volume_type}"
    cluster.kube.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com",
                        "parameters": parameters, "volumeBindingMode": "Immediate"})  # fmt: skip
    spec = dataclasses.replace(cluster.spec(name), size=None)
    requested, result = _requested_size(
        cluster, ProvisionRun(cluster.client(), spec, deadlines={Step.BOUND: 2.0})
    )
    assert (requested, result.spec.size) == (size, size)
    assert result.storage_class is not None
    assert (result.storage_class.provisioner, result.storage_class.volume_type) == (
        "ebs.csi.aws.com", volume_type,
    )  # fmt: skip
    said = f"claim of {size}: no size given, the smallest volume of type {volume_type}"
    assert said in result.log
    given = dataclasses.replace(spec, size="3Gi")
    requested, result = _requested_size(
        cluster, ProvisionRun(cluster.client(), given, deadlines={Step.BOUND: 2.0})
    )
    assert (requested, result.spec.size) == ("3Gi", "3Gi")
    assert not [line for line in result.log if line.startswith("claim of")]


#: A run in a process of its own, for the test to kill mid-run.
DRIVER = """
import json, sys
from fioprobe.kube.client import KubeClient
from fioprobe.provision.workload import RunSpec
from fioprobe.provision.runner import ProvisionRun, RunResult
from fioprobe.provision.steps import Step
args = json.loads(sys.argv[1])
client = KubeClient(args["server"], args["token"], args["ca"])
spec = RunSpec(**args["spec"])
run = ProvisionRun(client, spec, deadlines={Step.SCHEDULED: 600.0})
print(run.objects.claim, flush=True)
run.execute()
"""


@pytest.fixture
def killed_run(cluster: Cluster) -> Iterator[str]:
    """A run of `nowhere-wait` on node-2, killed (SIGKILL) once its claim and pod exist."""
    spec = cluster.spec("nowhere-wait", node="node-2")
    args = {"server": cluster.kube.url, "token": str(cluster.token_file),
            "ca": str(cluster.kube.ca_file), "spec": spec.__dict__}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(args)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        name = proc.stdout.readline().strip()
        services.wait_for(lambda: name in cluster.names("pods"), timeout=60,
                          what="the killed run's pod")  # fmt: skip
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        yield name
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_next_run_removes_what_a_killed_run_left_and_nothing_else(
    cluster: Cluster, killed_run: str
) -> None:
    kube = cluster.kube
    spec = cluster.spec("nowhere-wait", node="node-2")
    foreign = [
        ("foreign-no-labels", {}),
        ("foreign-other-owner", {OWNER_LABEL: "someone-else", SLOT_LABEL: slot_of(spec)}),
        ("foreign-other-slot", {OWNER_LABEL: OWNER, SLOT_LABEL: "0123456789abcdef"}),
    ]
    kube.apply([
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "nowhere-wait",
                  "resources": {"requests": {"storage": "1Gi"}}}}
        for name, labels in foreign
    ])  # fmt: skip
    assert killed_run in cluster.names("pvc") and killed_run in cluster.names("pods")
    started = time.monotonic()
    result = ProvisionRun(cluster.client(), spec, deadlines={Step.SCHEDULED: 2.0}).execute()
    assert set(result.removed) == {f"pod {killed_run}", f"claim {killed_run}"}, result.log
    assert killed_run not in cluster.names("pods")
    assert killed_run not in cluster.names("pvc")
    assert {name for name, _ in foreign} <= cluster.names("pvc")
    assert time.monotonic() - started < 60
