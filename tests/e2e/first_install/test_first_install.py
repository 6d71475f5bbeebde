"""The first install on the cluster this machine has, as a user makes it: `helm install
--create-namespace` with the chart's defaults but a one-minute interval and where this
cluster's etcd keeps its data (scripts/e2e/run.sh, FIOPROBE_E2E_SUITE=first-install). The node's
name is one no default mentions; a real dynamic provisioner (local-path-provisioner) is behind
the default StorageClass.

In order: the node first lacks the control-plane role label (a managed cluster's view: nothing
runs for etcd, nothing fires for it, the notes say why); then it gets the label, as a
control-plane node joining later, and within 10 minutes the etcd probe pushes and the etcd
stream is scraped for that node with etcd_disk="true", a scheduled probe and a stream run on
the default StorageClass under its real name, the node directories exist with the documented
owner and mode; no probe-health alert fires for the next intervals; the control-plane taint
holds a StorageClass probe's pod but not the etcd pods; node directories the deployment did not
make are refused with nothing written; `helm uninstall` leaves nothing of the release in the
cluster. Each wait counts FIOPROBE_E2E_INTERVALS one-minute intervals: 4 in `make
e2e-first-install`, 1 in `make e2e`'s phase of it (CI's time budget)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ETCD_NAMESPACE,
    HELM4,
    NAMESPACE,
    NODE,
    REPO,
    Kube,
    Measurements,
    StreamDiscovery,
    alertmanager_alerts,
    continuous_targets_file,
    find_group,
    group_value,
    helm,
)
from support import services

PROBE_UID = 65532
#: The default StorageClass of the e2e cluster in this suite (scripts/e2e/cluster.sh).
DEFAULT_CLASS = "local-path"
#: What the acceptance allows from the install to the first results: a new etcd pod runs from
#: the interval after the one it started in, the CronJob's first run waits for a minute.
WITHIN_SECONDS = 600
#: The chart's defaults on the node (etcd.hostPath, stateHostPath).
NODE_DIRS = (Path("/var/lib/etcd-fioprobe"), Path("/var/lib/fioprobe/state"))
RELEASE = "fioprobe"
CHART = REPO / "charts" / "fioprobe"
#: How many one-minute intervals each "nothing fires" wait lasts (scripts/e2e/run.sh).
INTERVALS = int(os.environ.get("FIOPROBE_E2E_INTERVALS", "4"))
#: The role label the chart's defaults find etcd nodes by, and the taint that usually goes with it.
ROLE_LABEL = "node-role.kubernetes.io/control-plane"
TAINT = f"{ROLE_LABEL}:NoSchedule"
#: The probe-health alerts, which must stay quiet on a healthy install.
PROBE_HEALTH = {"FioProbeMissing", "FioProbeStale", "FioProbeFailing", "FioProbeContinuousMissing"}
#: Where the refusal scenario plants what the deployment did not make (removed by run.sh's
#: teardown, as the chart's node directories are).
PLANTED = Path("/var/lib/fioprobe-e2e-planted")


def ready_pods(kube: Kube, namespace: str, component: str) -> list[dict[str, Any]]:
    pods = kube.json("pods", "-n", namespace, "-l", f"app.kubernetes.io/component={component}")[
        "items"
    ]
    return [
        p
        for p in pods
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])
        )
    ]


def etcd_alerts(prometheus_url: str) -> list[dict[str, Any]]:
    """Every etcd alert, pending or firing: the etcd disk's, or a probe-health one about etcd."""
    found = services.query(prometheus_url, 'ALERTS{storageclass="etcd-disk"}')
    found += services.query(prometheus_url, 'ALERTS{scope="etcd"}')
    return [a["metric"] for a in found]


def test_without_the_role_nothing_runs_or_fires_for_etcd(
    kube: Kube, run_dir: Path, prometheus: Any, alertmanager: Any
) -> None:
    """A managed control plane's view (EKS, GKE, AKS: no node carries the role): the notes say
    that etcd's disks are not visible here, no etcd pod runs, and for the intervals below no
    etcd alert is even pending. Then the node gets the role, as a control-plane node that joins
    later: the rest of this module sees the DaemonSets follow without a new install.

    This Prometheus has no kube-state-metrics, so the rules' etcd nodes are the nodes that
    push an etcd probe (alerts/recording.libsonnet): here the quiet shows that nothing runs
    and nothing pushes. The role-based inventory itself (kube_node_role) is checked by the
    promtool scenarios (alerts/tests/probe-health-etcd-by-role.yaml)."""
    notes = (run_dir / "logs" / "helm-install.log").read_text()
    assert "etcd's disks are not visible on this cluster" in notes, notes
    assert ROLE_LABEL not in kube.json("node", NODE)["metadata"]["labels"]
    # The release's rules are loaded, the etcd probe among the expected ones.
    services.wait_for(
        lambda: services.query(prometheus.url, "probe:fioprobe_expected_etcd:info"),
        120,
        "the etcd probe among the expected ones in Prometheus",
        2,
    )
    deadline = time.time() + INTERVALS * 60
    while time.time() < deadline:
        pods = kube.json("pods", "-n", ETCD_NAMESPACE)["items"]
        assert not pods, [p["metadata"]["name"] for p in pods]
        for daemonset in kube.json("daemonset", "-n", ETCD_NAMESPACE)["items"]:
            assert daemonset["status"]["desiredNumberScheduled"] == 0, daemonset["metadata"]
        assert not services.query(prometheus.url, "node:fioprobe_expected_etcd:info")
        assert not etcd_alerts(prometheus.url)
        alerts = [a["labels"] for a in alertmanager_alerts(alertmanager.url)]
        assert not [a for a in alerts if "etcd" in (a.get("storageclass", ""), a.get("scope"))]
        time.sleep(10)
    kube("label", "node", NODE, f"{ROLE_LABEL}=")
    (run_dir / "role-labelled-at").write_text(f"{time.time()}\n")


@pytest.fixture(scope="module", autouse=True)
def stream_discovery(kube: Kube, run_dir: Path, prometheus: Any) -> Iterator[StreamDiscovery]:
    """The streams' pods into Prometheus' file discovery from the install on, as a PodMonitor
    finds them: the release's FioProbeContinuousMissing counts from the install too."""
    discovery = StreamDiscovery(
        kube, continuous_targets_file(run_dir), (NAMESPACE, ETCD_NAMESPACE)
    ).start()
    yield discovery
    discovery.stop()


@pytest.fixture(scope="module")
def role_labelled_at(run_dir: Path) -> float:
    """When the node got the control-plane role (the first test): the etcd parts start then."""
    path = run_dir / "role-labelled-at"
    if not path.exists():
        pytest.fail("the node never got its role: the first test of this module failed")
    return float(path.read_text())


def test_the_etcd_probe_and_stream_run_on_the_role_node(
    kube: Kube,
    pushgateway_url: str,
    prometheus: Any,
    role_labelled_at: float,
    measurements: Measurements,
) -> None:
    key = {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": NODE}
    group = services.wait_for(
        lambda: (g := find_group(pushgateway_url, **key)) and g,
        max(1.0, role_labelled_at + WITHIN_SECONDS - time.time()),
        f"the etcd probe's group {key}",
        2,
    )
    assert group_value(group, "fioprobe_success") == 1, group.get("fioprobe_failure_reason_info")
    info = group["fioprobe_info"]["metrics"][0]["labels"]
    assert info["etcd_disk"] == "true" and info["ran_on_node"] == NODE, info
    measurements.record(
        "first_install_role_label_to_etcd_push_seconds", round(time.time() - role_labelled_at, 1)
    )
    for directory in NODE_DIRS:
        stat = directory.stat()
        assert (stat.st_uid, stat.st_gid) == (PROBE_UID, PROBE_UID), directory
        assert stat.st_mode & 0o7777 == 0o700, (directory, oct(stat.st_mode))

    # The streams: the etcd node's and the default class's, scraped from their pods as soon as
    # they are ready (`stream_discovery`).
    kube.wait(lambda: ready_pods(kube, ETCD_NAMESPACE, "continuous"), 300, "the etcd stream's pod")
    kube.wait(
        lambda: ready_pods(kube, NAMESPACE, "continuous"), 300, "the StorageClass stream's pod"
    )
    for selector in (
        f'storageclass="etcd-disk", node="{NODE}", etcd_disk="true"',
        f'storageclass="{DEFAULT_CLASS}"',
    ):
        services.wait_for(
            lambda selector=selector: services.query(
                prometheus.url, f"fioprobe_continuous_info{{{selector}}}"
            ),
            120,
            f"the stream {selector} in Prometheus",
            2,
        )


def test_the_default_storageclass_is_probed_under_its_real_name(
    kube: Kube, pushgateway_url: str, applied_at: float, measurements: Measurements
) -> None:
    """The chart looked the default class up at install: its CronJob, its PVC (bound by the
    provisioner), its stream, all named after it."""
    cronjobs = {c["metadata"]["name"] for c in kube.json("cronjob", "-n", NAMESPACE)["items"]}
    # Beside it, the provisioning probe's, which provisions the same class.
    assert cronjobs == {f"fioprobe-{DEFAULT_CLASS}", "fioprobe-provision"}, cronjobs
    pvc = kube.json("pvc", "-n", NAMESPACE, f"fioprobe-{DEFAULT_CLASS}")
    assert pvc["spec"]["storageClassName"] == DEFAULT_CLASS
    for profile in ("etcd-fsync", "randread-iops"):
        key = {"storageclass": DEFAULT_CLASS, "profile": profile}
        group = services.wait_for(
            lambda key=key: find_group(pushgateway_url, **key),
            max(1.0, applied_at + WITHIN_SECONDS - time.time()),
            f"the default class's group {key}",
            2,
        )
        assert group_value(group, "fioprobe_success") == 1, (
            key,
            group.get("fioprobe_failure_reason_info"),
        )
        info = group["fioprobe_info"]["metrics"][0]["labels"]
        assert info["provisioner"] == "rancher.io/local-path", info
    measurements.record(
        "first_install_to_default_class_push_seconds", round(time.time() - applied_at, 1)
    )


def test_no_probe_health_alert_for_the_next_intervals(alertmanager: Any, prometheus: Any) -> None:
    """With everything running, the release's own rules (rendered for a one-minute interval)
    raise no Missing, Stale or Failing alert for the next intervals. Latency alerts are the
    disk's to decide (this machine's disk can be slow while other work runs): if one fires, the
    pushed p99 says why, and it is reported, not failed."""
    deadline = time.time() + INTERVALS * 60
    seen: list[dict[str, Any]] = []
    while time.time() < deadline:
        seen = [a for a in alertmanager_alerts(alertmanager.url)
                if a["labels"].get("alertname") in PROBE_HEALTH]  # fmt: skip
        assert not seen, seen
        time.sleep(10)
    rules = services.query(prometheus.url, 'ALERTS{alertstate="firing"}')
    print("alerts firing after the quiet intervals:", [r["metric"] for r in rules])


def pods_of(kube: Kube, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["pods", "-n", namespace] + (["-l", selector] if selector else [])
    return list(kube.json(*args)["items"])


def running(pod: dict[str, Any]) -> bool:
    return bool(pod["status"].get("phase") == "Running")


def test_the_control_plane_taint_holds_storageclass_pods_not_etcd_ones(kube: Kube) -> None:
    """With the control-plane taint on the node, the etcd pods (which tolerate it) start
    there again once deleted, while a StorageClass probe's pod (which must not land on a
    control-plane node) stays Pending on that taint."""
    job = "fioprobe-taint-check"
    kube("taint", "node", NODE, TAINT)
    try:
        before = {p["metadata"]["uid"] for p in pods_of(kube, ETCD_NAMESPACE)}
        assert len(before) == 2, "the etcd probe's pod and the etcd stream's"
        kube("delete", "pods", "-n", ETCD_NAMESPACE, "--all", "--wait=true", timeout=180)

        def replaced() -> bool:
            pods = pods_of(kube, ETCD_NAMESPACE)
            fresh = [p for p in pods if p["metadata"]["uid"] not in before]
            return len(fresh) == 2 and all(running(p) for p in fresh)

        kube.wait(replaced, 180, "the etcd pods running again on the tainted node")
        kube("create", "job", "-n", NAMESPACE, job, f"--from=cronjob/fioprobe-{DEFAULT_CLASS}")

        def held() -> str:
            for pod in pods_of(kube, NAMESPACE, f"job-name={job}"):
                for condition in pod["status"].get("conditions", []):
                    if condition["type"] == "PodScheduled" and condition["status"] == "False":
                        return str(condition.get("message", ""))
            return ""

        # The scheduler names no taint key in its message: that the only taint on the only
        # node is the control-plane one says which.
        message = kube.wait(held, 120, "the StorageClass probe's pod held by the taint")
        assert "untolerated taint" in message, message
        taints = kube.json("node", NODE)["spec"].get("taints", [])
        assert [t["key"] for t in taints] == [ROLE_LABEL], taints
    finally:
        # The job and its pod first: untainted, the pod would start an extra probe run.
        kube("delete", "job", "-n", NAMESPACE, job, "--ignore-not-found", "--cascade=foreground",
             "--wait=true", timeout=180, check=False)  # fmt: skip
        kube("taint", "node", NODE, f"{TAINT}-", check=False)


def snapshot(root: Path) -> dict[str, tuple[int, int, int, int, str]]:
    """Every entry under `root` (symlinks not followed): mode, owner, size and, for a symlink,
    its target: what "nothing written" is checked against."""
    entries: dict[str, tuple[int, int, int, int, str]] = {}
    for directory, names, files in os.walk(root, followlinks=False):
        for name in [*names, *files, ""]:
            path = Path(directory, name)
            info = path.lstat()
            target = os.readlink(path) if path.is_symlink() else ""
            entries[str(path)] = (info.st_mode, info.st_uid, info.st_gid, info.st_size, target)
    return entries


def upgrade_etcd_host_path(
    kube: Kube, run_dir: Path, path: Path, server_side: str = "true"
) -> set[str]:
    """`helm upgrade` to another etcd.hostPath, with Helm 4 (the release is Helm 3's: run.sh);
    the uids of the etcd probe's pods before. `server_side`: Helm 4's --server-side, "auto"
    (its default: the previous release's method, client-side for Helm 3's) or "true" (server-side
    apply taking over the fields Helm 3 set: a conflict with another field manager fails it)."""
    before = {
        p["metadata"]["uid"]
        for p in pods_of(kube, ETCD_NAMESPACE, "app.kubernetes.io/component=probe")
    }
    helm(
        run_dir, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set", f"etcd.hostPath={path}", f"--server-side={server_side}", binary=HELM4,
    )  # fmt: skip
    return before


def probe_pod_after(kube: Kube, before: set[str]) -> dict[str, Any] | None:
    """The etcd probe's pod that replaced those in `before`, if there is one yet."""
    for pod in pods_of(kube, ETCD_NAMESPACE, "app.kubernetes.io/component=probe"):
        if pod["metadata"]["uid"] not in before:
            return pod
    return None


def prepare_failure(kube: Kube, before: set[str]) -> str:
    """What the new pod's prepare step said once it exited non-zero, else "": its termination
    message (FallbackToLogsOnError puts the log's tail there, as `kubectl describe` shows it),
    read from the same status that says it exited. Its log is no substitute: the kubelet restarts
    the step in back-off and removes the older container, so a log asked for after the status
    was read may already be gone."""
    pod = probe_pod_after(kube, before)
    if pod is None:
        return ""
    for status in pod["status"].get("initContainerStatuses", []):
        if status["name"] != "prepare":
            continue
        for state in (status.get("state", {}), status.get("lastState", {})):
            exited = state.get("terminated")
            if exited and exited.get("exitCode"):
                return str(exited.get("message", ""))
    return ""


def mount_failure(kube: Kube, before: set[str]) -> str:
    """The kubelet's FailedMount event of the new pod, if there is one yet."""
    pod = probe_pod_after(kube, before)
    if pod is None:
        return ""
    events = kube.json(
        "events", "-n", ETCD_NAMESPACE, "--field-selector",
        f"involvedObject.uid={pod['metadata']['uid']},reason=FailedMount",
    )["items"]  # fmt: skip
    return "\n".join(e.get("message", "") for e in events)


@pytest.fixture
def planted(run_dir: Path) -> Iterator[Path]:
    """An empty directory to plant in, removed by run.sh's teardown (also on failure)."""
    with (run_dir / "first-install-node-dirs").open("a") as listing:
        listing.write(f"{PLANTED}\n")
    PLANTED.mkdir(mode=0o755)
    yield PLANTED


def test_node_directories_the_deployment_did_not_make_are_refused(
    kube: Kube, run_dir: Path, pushgateway_url: str, planted: Path
) -> None:
    """etcd.hostPath pointed at what someone else made: a symlink (to an empty directory of
    root's, which the prepare step would otherwise take), a file, a directory of another user;
    each refused with nothing under the planted directory changed. Then a directory on another
    filesystem than etcd's data: prepared, but the probe refuses to run there and says why
    (unsafe_target, etcd_disk="false"), with nothing written in it."""
    target = planted / "target"
    target.mkdir(mode=0o755)
    (planted / "symlink").symlink_to(target)
    (planted / "file").write_text("someone else's file\n")
    foreign = planted / "foreign"
    foreign.mkdir(mode=0o755)
    os.chown(foreign, 1234, 1234)
    other = planted / "otherfs"
    other.mkdir(mode=0o755)
    cases = [
        ("symlink", prepare_failure, "the host path or one of its parents is a symlink"),
        ("foreign", prepare_failure, "owned by uid 1234, not by root or 65532"),
        ("file", mount_failure, "is not a directory"),
    ]
    untouched = snapshot(planted)
    try:
        for name, failure, message in cases:
            before_files = snapshot(planted)
            # The first upgrade as Helm 4 does it by default, the others server-side.
            method = "auto" if name == cases[0][0] else "true"
            before = upgrade_etcd_host_path(kube, run_dir, planted / name, method)
            text = kube.wait(
                lambda failure=failure, before=before: failure(kube, before),
                180,
                f"the new etcd probe pod to refuse the planted {name}",
            )
            assert message in text, (name, text)
            assert snapshot(planted) == before_files, name

        # Another filesystem than etcd's data (a tmpfs): the directory in it is the
        # deployment's to make, but the probe must not run there.
        subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                "size=16m,mode=0755",
                "fioprobe-e2e-otherfs",
                str(other),
            ],
            check=True,
        )
        probe_dir = other / "probe"
        upgraded_at = time.time()
        before = upgrade_etcd_host_path(kube, run_dir, probe_dir)
        key = {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": NODE}

        def refused() -> dict[str, Any] | None:
            group = find_group(pushgateway_url, **key)
            if not group or (group_value(group, "push_time_seconds") or 0) < upgraded_at:
                return None
            return group

        # The new pod runs from the interval after the one it started in.
        group = services.wait_for(refused, 300, "the etcd probe's push from another filesystem", 2)
        assert group_value(group, "fioprobe_success") == 0, group
        reason = group["fioprobe_failure_reason_info"]["metrics"][0]["labels"]["reason"]
        assert reason == "unsafe_target", reason
        info = group["fioprobe_info"]["metrics"][0]["labels"]
        assert info["etcd_disk"] == "false", info
        pod = probe_pod_after(kube, before) or {}
        # The run pushes its outcome, then prints it: the line follows the push.
        refusal = "the probe directory is not on etcd's filesystem"

        def log() -> str:
            return kube("logs", "-n", ETCD_NAMESPACE, pod["metadata"]["name"], "-c", "fioprobe")

        with contextlib.suppress(TimeoutError):
            kube.wait(lambda: refusal in log(), 60, "the etcd probe's log to say why")
        assert refusal in (text := log()), text
        assert probe_dir.is_dir() and not list(probe_dir.iterdir()), list(probe_dir.iterdir())
    finally:
        helm(
            run_dir, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values",
            "--set", "etcd.hostPath=/var/lib/etcd-fioprobe", binary=HELM4,
        )  # fmt: skip

        def released() -> bool:
            return not any(
                str(planted) in json.dumps(p["spec"]["volumes"])
                for p in pods_of(kube, ETCD_NAMESPACE)
            )

        kube.wait(released, 180, "no etcd pod using the planted directories")
        subprocess.run(["umount", "-l", str(other)], check=False, capture_output=True)
    # Nothing the etcd pods (the probe's and the stream's) did later changed what was planted
    # either: the tmpfs is gone, its mount point as it was.
    assert snapshot(planted) == untouched


def test_uninstall_leaves_nothing_of_the_release(kube: Kube, run_dir: Path) -> None:
    """`helm uninstall` removes every object the release made: its namespaced objects, the
    etcd namespace it created, the cluster-wide role of the etcd probes, and the PVCs (the
    Pushgateway's and the probe's; the streams' go with their StatefulSets). What stays is what
    docs/MANIFESTS.md says: the node directories and the state in them."""
    helm(
        run_dir, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "5m",
        binary=HELM4,
    )  # fmt: skip

    def leftovers() -> list[str]:
        found = []
        for kind in ("all", "pvc", "configmap", "networkpolicy", "serviceaccount"):
            for item in kube.json(kind, "-A", "-l", "app.kubernetes.io/part-of=fioprobe")["items"]:
                found.append(f"{item['kind']}/{item['metadata']['name']}")
        for kind in ("clusterrole", "clusterrolebinding", "namespace"):
            for item in kube.json(kind, "-l", "app.kubernetes.io/part-of=fioprobe")["items"]:
                if item.get("status", {}).get("phase") != "Terminating":
                    found.append(f"{item['kind']}/{item['metadata']['name']}")
        return found

    kube.wait(lambda: not leftovers(), 300, "every object of the release gone")
    for directory in NODE_DIRS:
        assert directory.is_dir(), f"{directory}: the node's state is kept, as documented"
