"""The shipped manifests, applied as docs/MANIFESTS.md says, on a real node: every CronJob fires
on its own schedule, the etcd probes' DaemonSet finds the node by its role label and creates
its node directories, fio runs as the non-root user on PVCs with fsGroup and on the etcd
hostPath under a read-only root filesystem, and the results reach the Pushgateway and
Prometheus (the failures of the probes of the full and the read-only volume too)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from conftest import (
    ETCD_DAEMONSET,
    ETCD_NAMESPACE,
    FAILING_CLASSES,
    NAMESPACE,
    NODE,
    SLOW_CLASS,
    UNBOUND_CLASS,
    Kube,
    Measurements,
    expected_groups,
    find_group,
    group_value,
    pod_template,
    pushgateway_groups,
    run_pod,
)
from support import services

PROBE_UID = 65532
# A first run waits for the next minute boundary, then pulls nothing (the image is loaded) and
# runs up to three profiles; generous for a busy 2-core machine.
FIRST_RUN_TIMEOUT = 420


def cronjobs(kube: Kube) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.json("cronjob", "-n", NAMESPACE)["items"]
    return items


def test_first_metric_arrives(
    pushgateway_url: str, applied_at: float, measurements: Measurements
) -> None:
    def any_group() -> bool:
        return any(
            g["labels"].get("job") == "fioprobe" for g in pushgateway_groups(pushgateway_url)
        )

    services.wait_for(any_group, FIRST_RUN_TIMEOUT, "a first fioprobe group in the Pushgateway", 1)
    measurements.record("apply_to_first_metric_seconds", round(time.time() - applied_at, 1))


def test_every_cronjob_fires_on_its_own(kube: Kube) -> None:
    """Each CronJob that can run on this node starts jobs by itself: those of healthy disks
    succeed, those of the full and the read-only volume fail (the probe exits 1 after pushing
    its failure)."""
    jobs = cronjobs(kube)
    failing = {f"fioprobe-{name}" for name in FAILING_CLASSES}
    assert {j["metadata"]["name"] for j in jobs} == {
        "fioprobe-gp2",
        "fioprobe-gp3",
        f"fioprobe-{SLOW_CLASS}",
        f"fioprobe-{UNBOUND_CLASS}",
        *failing,
        "fioprobe-provision",
    }
    # The provisioning probe's runs are tests/e2e/test_40_provisioning.py's.
    jobs = [j for j in jobs if j["metadata"]["name"] != "fioprobe-provision"]
    # gp2, gp3 and the fault classes whose volume exists
    runnable = [j for j in jobs if j["metadata"]["name"] != f"fioprobe-{UNBOUND_CLASS}"]
    assert len(runnable) == 5, [j["metadata"]["name"] for j in runnable]
    for cronjob in runnable:
        name, namespace = cronjob["metadata"]["name"], cronjob["metadata"]["namespace"]
        outcome = "Failed" if name in failing else "Complete"

        def finished(name: str = name, namespace: str = namespace, outcome: str = outcome) -> bool:
            for job in kube.json("job", "-n", namespace)["items"]:
                owners = job["metadata"].get("ownerReferences", [])
                if not any(o["kind"] == "CronJob" and o["name"] == name for o in owners):
                    continue
                for condition in job.get("status", {}).get("conditions", []):
                    if condition["type"] == outcome and condition["status"] == "True":
                        return True
            return False

        kube.wait(
            finished, FIRST_RUN_TIMEOUT, f"a job of CronJob {namespace}/{name} ending {outcome}"
        )
        if outcome == "Complete":
            status = kube.json("cronjob", "-n", namespace, name).get("status", {})
            assert status.get("lastSuccessfulTime"), status
        # Created by the CronJob controller on its schedule: nothing here creates jobs of it.
        for job in kube.json("job", "-n", namespace)["items"]:
            owners = job["metadata"].get("ownerReferences", [])
            if job["metadata"]["name"].startswith(name + "-"):
                assert owners and owners[0]["kind"] == "CronJob", job["metadata"]


def test_a_probe_without_a_volume_stays_pending(kube: Kube) -> None:
    """The StorageClass e2e-unbound does not exist here: its probe's PVC never binds, its pods
    are never scheduled (no fio runs anywhere), and say why."""

    def pending_pods() -> list[dict[str, Any]]:
        pods = kube.json("pod", "-n", NAMESPACE)["items"]
        return [
            p
            for p in pods
            if p["metadata"]["labels"].get("app.kubernetes.io/instance") == UNBOUND_CLASS
        ]

    pods = kube.wait(pending_pods, 180, f"a pod of the CronJob of {UNBOUND_CLASS}")
    for pod in pods:
        assert pod["status"]["phase"] == "Pending", pod["status"]
        conditions = {c["type"]: c for c in pod["status"].get("conditions", [])}
        assert conditions["PodScheduled"]["reason"] == "Unschedulable", conditions


def test_the_etcd_probes_find_the_node_by_its_role_and_create_their_directories(
    kube: Kube, etcd_dir: Path, state_dir: Path
) -> None:
    """The etcd probes' DaemonSet names no node: its one pod runs on the node labelled
    node-role.kubernetes.io/control-plane, whatever it is called. Its prepare step created the
    probe and state directories, absent before the install (scripts/e2e/run.sh checks), owned
    by the probe user with mode 0700."""

    def running() -> list[dict[str, Any]]:
        pods = kube.json("pod", "-n", ETCD_NAMESPACE, "-l", "app.kubernetes.io/component=probe")[
            "items"
        ]
        return [p for p in pods if p["status"].get("phase") == "Running"]

    (pod,) = kube.wait(running, FIRST_RUN_TIMEOUT, f"the pod of DaemonSet {ETCD_DAEMONSET}")
    assert pod["spec"]["nodeName"] == NODE
    owners = pod["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("DaemonSet", ETCD_DAEMONSET)]
    (prepare,) = pod["status"]["initContainerStatuses"]
    assert prepare["state"]["terminated"]["exitCode"] == 0, prepare
    for directory in (etcd_dir, state_dir):
        info = directory.stat()
        assert (info.st_uid, info.st_gid) == (PROBE_UID, PROBE_UID), directory
        assert info.st_mode & 0o7777 == 0o700, (directory, oct(info.st_mode))


def test_every_probe_succeeds_in_the_pushgateway(
    pushgateway_url: str, manifests: list[dict[str, Any]], measurements: Measurements
) -> None:
    keys = expected_groups(manifests)
    assert len(keys) >= 7
    for key in keys:
        group = services.wait_for(
            lambda key=key: find_group(pushgateway_url, **key),
            FIRST_RUN_TIMEOUT,
            f"Pushgateway group {key}",
            2,
        )
        if key["storageclass"] in FAILING_CLASSES:
            # Their failure and its reason: tests/e2e/test_15_alerts.py.
            assert group_value(group, "fioprobe_success") == 0, key
            continue
        assert group_value(group, "fioprobe_success") == 1, (
            key,
            group.get("fioprobe_failure_reason_info"),
        )
        owner = group["fioprobe_owner_info"]["metrics"][0]["labels"]["owner"]
        assert owner == key["storageclass"], (key, owner)
        # The run time of each profile, for docs/MANIFESTS.md (printed by `make e2e`).
        label = ",".join(f"{k}={v}" for k, v in key.items())
        duration = group_value(group, "fioprobe_duration_seconds")
        assert duration is not None and duration > 0, key
        measurements.record(f"profile_run_seconds{{{label}}}", round(duration, 2))
        info = group["fioprobe_info"]["metrics"][0]["labels"]
        # The downward API's node name reached the probe.
        assert info["ran_on_node"] == NODE, info


def test_metrics_arrive_in_prometheus(
    prometheus: Any, manifests: list[dict[str, Any]], applied_at: float, measurements: Measurements
) -> None:
    for key in expected_groups(manifests):
        selector = ",".join(f'{k}="{v}"' for k, v in key.items())
        success = 0 if key["storageclass"] in FAILING_CLASSES else 1
        services.wait_for(
            lambda selector=selector, success=success: services.query(
                prometheus.url, f"fioprobe_success{{{selector}}} == {success}"
            ),
            120,
            f"fioprobe_success{{{selector}}} == {success} in Prometheus",
            2,
        )
    # The recording rules of the mixin evaluate on the pushed series.
    services.wait_for(
        lambda: services.query(prometheus.url, "probe:push_time_seconds:max"),
        120,
        "the mixin's recording rule probe:push_time_seconds:max",
        2,
    )
    measurements.record(
        "apply_to_metrics_in_prometheus_seconds", round(time.time() - applied_at, 1)
    )


def test_probe_files_belong_to_the_probe_user(
    run_dir: Path, etcd_dir: Path, state_dir: Path
) -> None:
    """fio ran as 65532: its state on the PVCs (dedicated volumes; group from fsGroup), the
    slow FUSE one included; the etcd probe's (a shared volume) in the node's state directory,
    and nothing of it on the etcd disk."""
    for volume in ("gp2-0", "gp3-0", "slow"):
        root = run_dir / "pv" / volume
        assert root.stat().st_gid == PROBE_UID, f"fsGroup not applied to {root}"
        state = root / ".fioprobe-state"
        assert state.is_dir(), f"no state written on {root}: {sorted(os.listdir(root))}"
        for path in [state, *state.rglob("*")]:
            assert path.stat().st_uid == PROBE_UID, path
    assert not (etcd_dir / ".fioprobe-state").exists(), sorted(os.listdir(etcd_dir))
    targets = sorted(os.listdir(state_dir))
    assert targets, f"no state written in {state_dir}"
    for path in [state_dir, *state_dir.rglob("*")]:
        assert path.stat().st_uid == PROBE_UID, path


IDENTITY_CHECK = r"""
import errno, json, os
result = {"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()), "writes": {}}
for path in ["/", "/usr/share/fioprobe/jobs", "/opt/fioprobe", "/etc", "/tmp", "/probe"]:
    try:
        with open(os.path.join(path, ".e2e-write-check"), "w") as f:
            f.write("x")
        os.remove(os.path.join(path, ".e2e-write-check"))
        result["writes"][path] = "ok"
    except OSError as exc:
        result["writes"][path] = errno.errorcode.get(exc.errno, str(exc.errno))
import importlib.util
result["pip"] = importlib.util.find_spec("pip") is not None
result["setuptools"] = importlib.util.find_spec("setuptools") is not None
print(json.dumps(result))
"""


def test_non_root_read_only_root_filesystem(kube: Kube) -> None:
    """The probe's own pod template (security contexts, volumes) with a check as command: the
    user is 65532 with the fsGroup, the root filesystem refuses writes, /tmp and the PVC take
    them, and the runtime has no pip or setuptools."""
    template = pod_template(kube, NAMESPACE, "fioprobe-gp3")
    assert template["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    phase, log = run_pod(
        kube, NAMESPACE, "e2e-identity", template, ["python3", "-c", IDENTITY_CHECK]
    )
    assert phase == "Succeeded", log
    result = json.loads(log.strip().splitlines()[-1])
    assert result["uid"] == PROBE_UID and result["gid"] == PROBE_UID, result
    assert PROBE_UID in result["groups"], result
    for path in ["/", "/usr/share/fioprobe/jobs", "/opt/fioprobe", "/etc"]:
        assert result["writes"][path] == "EROFS", result
    assert result["writes"]["/tmp"] == "ok" and result["writes"]["/probe"] == "ok", result
    assert not result["pip"] and not result["setuptools"], result
