"""The continuous stream on the real node: the DaemonSet's pod writes on the node's slow etcd
disk (15 ms per fsync) as the probe user, under a read-only root filesystem, and a real
Prometheus scrapes it from the pod (the generated scrape configuration's selection, through
file-based discovery): the stream is seen as an etcd disk, and its slow fdatasyncs show."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import (
    ETCD_NAMESPACE,
    NODE,
    Kube,
    Measurements,
    continuous_targets_file,
    metrics_ports,
)
from support import services
from support.promql import first_value, instant_values

#: The pod starts once the image is there (loaded by run.sh); generous for a busy machine.
POD_TIMEOUT = 300
#: Two 5-second scrapes after the pod's address is in the file, with room for a loaded host.
SCRAPE_TIMEOUT = 120
COMPONENT = "app.kubernetes.io/component=continuous"


def stream_pods(kube: Kube) -> list[dict[str, Any]]:
    return kube.json("pods", "-n", ETCD_NAMESPACE, "-l", COMPONENT)["items"]


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_stream_runs_on_the_etcd_node_and_prometheus_scrapes_it(
    kube: Kube, run_dir: Path, prometheus: Any, applied_at: float, measurements: Measurements
) -> None:
    pods = kube.wait(
        lambda: [p for p in stream_pods(kube) if ready(p)], POD_TIMEOUT, "a ready stream pod"
    )
    (pod,) = pods
    assert pod["spec"]["nodeName"] == NODE
    (port,) = metrics_ports(pod)
    labels = {"namespace": ETCD_NAMESPACE, "pod": pod["metadata"]["name"]}
    targets = [{"targets": [f"{pod['status']['podIP']}:{port}"], "labels": labels}]
    continuous_targets_file(run_dir).write_text(json.dumps(targets))

    selector = f'storageclass="etcd-disk", node="{NODE}"'
    info = f'fioprobe_continuous_info{{{selector}, etcd_disk="true"}}'
    services.wait_for(
        lambda: services.query(prometheus.url, info), SCRAPE_TIMEOUT, "the stream in Prometheus", 2
    )
    measurements.record("continuous_apply_to_scraped_seconds", round(time.time() - applied_at, 1))
    # It writes as the probe user, not as root, and its fdatasyncs are the disk's: the
    # node's etcd disk adds 15 ms to each, so they land above the 10 ms bucket.
    slow = (
        f"sum(fioprobe_continuous_sync_latency_seconds_count{{{selector}}})"
        f' - sum(fioprobe_continuous_sync_latency_seconds_bucket{{{selector}, le="0.01"}})'
    )
    services.wait_for(
        lambda: (first_value(prometheus.url, slow) or 0.0) >= 3,
        SCRAPE_TIMEOUT,
        "slow fdatasyncs of the stream in Prometheus",
        2,
    )
    success = instant_values(prometheus.url, f"fioprobe_continuous_success{{{selector}}}")
    assert success == [1.0]
    wal = run_dir / "disks" / "etcd" / "etcd-fioprobe" / ".fioprobe-continuous"
    files = list(wal.iterdir())
    assert len(files) == 1 and files[0].stat().st_uid == 65532, files
