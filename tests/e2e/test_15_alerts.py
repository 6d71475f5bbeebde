"""Faults of real disks, each ending in the mixin's alert at Alertmanager, naming its cause:
a slow etcd disk and a slow StorageClass (FUSE filesystems adding 15 ms to every fsync), a
full volume and a read-only one (FioProbeFailing with no_space and read_only), a StorageClass
that does not exist (FioProbeMissing), and an etcd probe directory that belongs to root (a
pushed failure, then FioProbeFailing with its reason).

The disks are made by scripts/e2e/cluster.sh and probed from the first minute on
(scripts/e2e/config.jsonnet), so the alerts build up while the other tests run. Each wait
ends at a fixed time after `kubectl apply -k`, not after the test's own start: a scenario
that never fires fails there, and the ones after it do not wait all over again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from conftest import (
    ETCD_NAMESPACE,
    FAILING_CLASSES,
    NODE,
    SLOW_CLASS,
    UNBOUND_CLASS,
    AlertTimes,
    Kube,
    find_alert,
    find_group,
    group_value,
)
from support import services
from support.promql import first_value

PROBE_UID = 65532
# The slowest alert here, FioProbeMissing, needs Prometheus to have watched for 3.5 intervals
# (3.5 minutes); the first runs start up to a minute after the apply and Prometheus after the
# Pushgateway is ready. Ten minutes is about twice what it takes on a busy 2-core machine.
ALERTS_WITHIN_SECONDS = 600
# FioProbeFailing after a fault begins: the next run (within a minute), the `for` of two
# failed runs (1.5 intervals), evaluation and notification.
FAILING_WITHIN_SECONDS = 330
# The fsync delay of the slow disks (scripts/e2e/cluster.sh, SLOW_FSYNC_MS), less fio's bin
# rounding (under 1 %): a run's median fsync is at least this on a slow disk. Without the delay
# the same FUSE filesystem (in memory) takes about a millisecond.
SLOW_FSYNC_SECONDS = 0.015 * 0.99


def wait_for_alert(
    alertmanager: Any, until: float, alertname: str, **labels: str
) -> dict[str, Any]:
    """The alert at Alertmanager, waited for until the wall-clock time `until`."""
    return services.wait_for(
        lambda: find_alert(alertmanager.url, alertname, **labels),
        max(1.0, until - time.time()),
        f"{alertname} {labels} at Alertmanager",
        2,
    )


def last_run_median(prometheus: Any, **labels: str) -> float:
    """The last run's median fsync latency (fio's own percentile, as pushed): the alert is
    about the p99, but only the injected delay can make the typical fsync that slow, so this
    ties the alert to the fault and not to a busy machine's tail latency."""
    selector = ",".join(f'{k}="{v}"' for k, v in {**labels, "quantile": "0.5"}.items())
    median = first_value(prometheus.url, f"fioprobe_last_sync_latency_seconds{{{selector}}}")
    assert median is not None, f"no last-run median fsync latency of {labels} in Prometheus"
    return median


def test_slow_etcd_disk_raises_the_etcd_alert(
    alertmanager: Any, prometheus: Any, applied_at: float, alert_times: AlertTimes
) -> None:
    """The etcd probe directory lies on a disk whose fsyncs take 15 ms more: two slow runs out
    of three fire FioProbeEtcdFsyncLatencyHigh (warning: above 10 ms) for this node."""
    labels = {"storageclass": "etcd-disk", "node": NODE, "profile": "etcd-fsync"}
    alert = wait_for_alert(
        alertmanager,
        applied_at + ALERTS_WITHIN_SECONDS,
        "FioProbeEtcdFsyncLatencyHigh",
        severity="warning",
        **labels,
    )
    alert_times.record(alert)
    description = alert["annotations"]["description"]
    assert f"on node {NODE}" in description and "fsync p99" in description, description
    assert last_run_median(prometheus, **labels) >= SLOW_FSYNC_SECONDS


def test_root_owned_etcd_directory_ends_in_an_alert_with_its_reason(
    kube: Kube,
    etcd_dir: Path,
    pushgateway_url: str,
    alertmanager: Any,
    alert_times: AlertTimes,
) -> None:
    """The directory is handed to root while the probe runs (someone changed it on the node):
    the next scheduled run pushes a failure with a reason, the pod's log has no traceback, and
    two such runs raise FioProbeFailing naming that reason. After the slow etcd disk's alert: a
    failed run is never a slow one."""
    key = {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": NODE}
    services.wait_for(lambda: find_group(pushgateway_url, **key), 300, f"group {key}", 2)
    os.chown(etcd_dir, 0, 0)
    since = time.time()
    try:
        group = services.wait_for(
            lambda: (
                (g := find_group(pushgateway_url, **key))
                and (group_value(g, "push_time_seconds") or 0.0) > since
                and group_value(g, "fioprobe_success") == 0
                and g
            ),
            300,
            "a failure pushed by the etcd probe on the root-owned directory",
            2,
        )
        reasons = [m["labels"]["reason"] for m in group["fioprobe_failure_reason_info"]["metrics"]]
        assert len(reasons) == 1 and reasons[0], group["fioprobe_failure_reason_info"]
        pods = kube.json("pod", "-n", ETCD_NAMESPACE, "-l", "app.kubernetes.io/component=probe")[
            "items"
        ]
        ran = [p for p in pods if p["spec"].get("nodeName") == NODE]
        assert ran, "no etcd probe pod on the node"
        for pod in ran:
            log = kube("logs", "-n", ETCD_NAMESPACE, pod["metadata"]["name"], "-c", "fioprobe")
            assert "Traceback" not in log, log
        alert = wait_for_alert(
            alertmanager, since + FAILING_WITHIN_SECONDS, "FioProbeFailing", **key
        )
        alert_times.record(alert)
        description = alert["annotations"]["description"]
        assert f"Reason of the last failure: {reasons[0]}." in description, description
    finally:
        os.chown(etcd_dir, PROBE_UID, PROBE_UID)


def test_slow_storageclass_raises_the_storageclass_alert(
    alertmanager: Any, prometheus: Any, applied_at: float, alert_times: AlertTimes
) -> None:
    """A local PV on a FUSE filesystem adding 15 ms to every fsync, modelled as io2 (5 ms):
    three slow runs out of four fire FioProbeStorageClassLatencyHigh for that class, and its
    description names the volume type whose threshold it broke."""
    labels = {"storageclass": SLOW_CLASS, "profile": "etcd-fsync"}
    alert = wait_for_alert(
        alertmanager,
        applied_at + ALERTS_WITHIN_SECONDS,
        "FioProbeStorageClassLatencyHigh",
        **labels,
    )
    alert_times.record(alert)
    description = alert["annotations"]["description"]
    assert "(io2)" in description, description
    assert last_run_median(prometheus, **labels) >= SLOW_FSYNC_SECONDS


def test_full_and_read_only_volumes_raise_failing_with_their_reason(
    alertmanager: Any, pushgateway_url: str, applied_at: float, alert_times: AlertTimes
) -> None:
    """The full volume's probe fails with no_space before writing anything, the read-only
    one's with read_only; after two such runs FioProbeFailing fires for each, and its
    description says which reason."""
    for storageclass, reason in sorted(FAILING_CLASSES.items()):
        key = {"storageclass": storageclass, "profile": "etcd-fsync"}
        group = find_group(pushgateway_url, **key)
        assert group is not None, key
        pushed = [m["labels"]["reason"] for m in group["fioprobe_failure_reason_info"]["metrics"]]
        assert pushed == [reason], (key, pushed)
        alert = wait_for_alert(
            alertmanager, applied_at + ALERTS_WITHIN_SECONDS, "FioProbeFailing", **key
        )
        alert_times.record(alert)
        description = alert["annotations"]["description"]
        assert f"Reason of the last failure: {reason}." in description, (key, description)


def test_a_probe_that_cannot_run_raises_missing(
    kube: Kube, alertmanager: Any, applied_at: float, alert_times: AlertTimes
) -> None:
    """The configuration names the StorageClass e2e-unbound, which this cluster does not have:
    its CronJob's pods never schedule, nothing is pushed, and FioProbeMissing fires for it
    (and for no probe that runs)."""
    alert = wait_for_alert(
        alertmanager,
        applied_at + ALERTS_WITHIN_SECONDS,
        "FioProbeMissing",
        storageclass=UNBOUND_CLASS,
        profile="etcd-fsync",
    )
    alert_times.record(alert)
    assert "it never pushed" in alert["annotations"]["description"], alert["annotations"]
    assert find_alert(alertmanager.url, "FioProbeMissing", node=NODE) is None
    assert find_alert(alertmanager.url, "FioProbeMissing", storageclass="gp2") is None
