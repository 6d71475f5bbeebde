"""The Helm chart on the real node: scripts/e2e/run.sh installs it beside the manifests, in a
namespace of its own, right after `kubectl apply -k` (values: scripts/e2e/helm-values.yaml).
Its own Pushgateway comes up, its StorageClass probe's CronJob fires and the probe pushes a
successful run to that Pushgateway; its PrometheusRules, ServiceMonitor and dashboards are in
the cluster with the release label; `helm uninstall` then removes every object it made.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conftest import (
    HELM4,
    HELM_NAMESPACE,
    HELM_RELEASE,
    Kube,
    Measurements,
    find_group,
    group_value,
    helm,
    http_get,
)

CLASS = "e2e-helm"


def test_the_release_is_deployed(run_dir: Path) -> None:
    """Installed by Helm 4 (run.sh), which applies server-side: its objects' fields are the
    field manager "helm"'s, not a client-side last-applied annotation."""
    status = helm(run_dir, "status", HELM_RELEASE, "--namespace", HELM_NAMESPACE, binary=HELM4)
    assert "STATUS: deployed" in status, status
    version = helm(run_dir, "version", "--short", binary=HELM4)
    assert version.startswith("v4."), version


def test_its_probe_pushes_to_its_own_pushgateway(
    kube: Kube, run_dir: Path, measurements: Measurements
) -> None:
    installed_at = float((run_dir / "helm-installed-at").read_text())
    service = kube.json("service", "-n", HELM_NAMESPACE, "fioprobe-pushgateway")
    url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
    kube.wait(lambda: http_get(url + "/-/ready"), 180, "the release's Pushgateway to be ready")

    def pushed() -> dict[str, Any] | None:
        group = find_group(url, storageclass=CLASS, profile="etcd-fsync")
        return group if group and group_value(group, "fioprobe_success") == 1 else None

    group = kube.wait(pushed, 300, f"a successful {CLASS} run in the release's Pushgateway")
    # Runs so far, and when this test looked (the other scenarios run first): about one a
    # minute after the first, which waits for the PVC, the pod and the next minute.
    runs = group_value(group, "fioprobe_runs_total")
    measurements.record("helm_checked_after_install_seconds", f"{time.time() - installed_at:.0f}")
    measurements.record("helm_probe_runs_when_checked", f"{runs:.0f}")
    owners = [m["labels"]["owner"] for m in group["fioprobe_owner_info"]["metrics"]]
    assert owners == [CLASS]
    jobs = kube.json("job", "-n", HELM_NAMESPACE)["items"]
    owned = [
        j
        for j in jobs
        if [o["name"] for o in j["metadata"].get("ownerReferences", [])] == [f"fioprobe-{CLASS}"]
    ]
    assert owned, "no Job of the release's CronJob"


def test_its_rules_monitor_and_dashboards_are_in_the_cluster(kube: Kube) -> None:
    rules = kube.json("prometheusrule", "-n", HELM_NAMESPACE)["items"]
    assert {r["metadata"]["name"] for r in rules} == {"fioprobe", "fioprobe-expected"}
    monitors = kube.json("servicemonitor", "-n", HELM_NAMESPACE)["items"]
    assert [m["metadata"]["name"] for m in monitors] == ["fioprobe-pushgateway"]
    for obj in rules + monitors:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    dashboards = kube.json("configmap", "-n", HELM_NAMESPACE, "-l", "grafana_dashboard=1")
    assert len(dashboards["items"]) == 3


def test_uninstall_removes_what_it_installed(kube: Kube, run_dir: Path) -> None:
    helm(run_dir, "uninstall", HELM_RELEASE, "--namespace", HELM_NAMESPACE, "--wait", binary=HELM4)
    kinds = "cronjob,deployment,service,pvc,configmap,serviceaccount,networkpolicy"
    kinds += ",prometheusrule,servicemonitor"

    def gone() -> bool:
        left = kube.json(kinds, "-n", HELM_NAMESPACE, "-l", "app.kubernetes.io/managed-by=Helm")
        return not left["items"]

    kube.wait(gone, 120, "the release's objects to be deleted")
    kube("delete", "namespace", HELM_NAMESPACE, "--wait=false")
