"""The first install on the cluster this machine has, as a user makes it: `helm install
--create-namespace` with the chart's defaults but a one-minute interval and where this
cluster's etcd keeps its data (scripts/e2e/run.sh, FIOPROBE_E2E_SUITE=first-install). The node's
name is one no default mentions; it carries the control-plane role label; a real dynamic
provisioner (local-path-provisioner) is behind the default StorageClass. Within 10 minutes the
etcd probe pushes and the etcd stream is scraped for that node with etcd_disk="true", a
scheduled probe and a stream run on the default StorageClass under its real name, the node
directories exist with the documented owner and mode; for the next 4 intervals no probe-health
alert fires; `helm uninstall` leaves nothing of the release in the cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import (
    ETCD_NAMESPACE,
    NAMESPACE,
    NODE,
    Kube,
    Measurements,
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


def test_the_etcd_probe_and_stream_run_on_the_role_node(
    kube: Kube,
    run_dir: Path,
    pushgateway_url: str,
    prometheus: Any,
    applied_at: float,
    measurements: Measurements,
) -> None:
    key = {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": NODE}
    group = services.wait_for(
        lambda: (g := find_group(pushgateway_url, **key)) and g,
        max(1.0, applied_at + WITHIN_SECONDS - time.time()),
        f"the etcd probe's group {key}",
        2,
    )
    assert group_value(group, "fioprobe_success") == 1, group.get("fioprobe_failure_reason_info")
    info = group["fioprobe_info"]["metrics"][0]["labels"]
    assert info["etcd_disk"] == "true" and info["ran_on_node"] == NODE, info
    measurements.record("first_install_to_etcd_push_seconds", round(time.time() - applied_at, 1))
    for directory in NODE_DIRS:
        stat = directory.stat()
        assert (stat.st_uid, stat.st_gid) == (PROBE_UID, PROBE_UID), directory
        assert stat.st_mode & 0o7777 == 0o700, (directory, oct(stat.st_mode))

    # The streams: the etcd node's and the default class's, scraped from their pods (Debian's
    # Prometheus has no Kubernetes discovery: their addresses go into its file discovery).
    etcd_streams = kube.wait(
        lambda: ready_pods(kube, ETCD_NAMESPACE, "continuous"), 300, "the etcd stream's pod"
    )
    class_streams = kube.wait(
        lambda: ready_pods(kube, NAMESPACE, "continuous"), 300, "the StorageClass stream's pod"
    )
    targets = [
        {
            "targets": [f"{p['status']['podIP']}:9436"],
            "labels": {"namespace": p["metadata"]["namespace"], "pod": p["metadata"]["name"]},
        }
        for p in etcd_streams + class_streams
    ]
    continuous_targets_file(run_dir).write_text(json.dumps(targets))
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
    assert cronjobs == {f"fioprobe-{DEFAULT_CLASS}"}, cronjobs
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


def test_no_probe_health_alert_for_four_intervals(alertmanager: Any, prometheus: Any) -> None:
    """With everything running, the release's own rules (rendered for a one-minute interval)
    raise no Missing, Stale or Failing alert for four intervals. Latency alerts are the disk's
    to decide (this machine's disk can be slow while other work runs): if one fires, the pushed
    p99 says why, and it is reported, not failed."""
    quiet = {"FioProbeMissing", "FioProbeStale", "FioProbeFailing", "FioProbeContinuousMissing"}
    deadline = time.time() + 4 * 60
    seen: list[dict[str, Any]] = []
    while time.time() < deadline:
        seen = [a for a in alertmanager_alerts(alertmanager.url)
                if a["labels"].get("alertname") in quiet]  # fmt: skip
        assert not seen, seen
        time.sleep(10)
    rules = services.query(prometheus.url, 'ALERTS{alertstate="firing"}')
    print("alerts firing after four intervals:", [r["metric"] for r in rules])


def test_uninstall_leaves_nothing_of_the_release(kube: Kube, run_dir: Path) -> None:
    """`helm uninstall` removes every object the release made: its namespaced objects, the
    etcd namespace it created, the cluster-wide role of the etcd probes, and the PVCs (the
    Pushgateway's and the probe's; the streams' go with their StatefulSets). What stays is what
    docs/MANIFESTS.md says: the node directories and the state in them."""
    helm(run_dir, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "5m")

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
