"""Many clusters in one view: two clusters' Prometheus servers remote-write into a central one.

Real components: per simulated cluster a Pushgateway and a Prometheus (external label
`cluster`, the mixin's rules, remote write), and a central Prometheus started with its
remote-write receiver, as a Thanos Receive, Mimir or VictoriaMetrics would take the writes.
Both clusters push the same grouping keys; cluster a is healthy, cluster b's probe fails.
On the central Prometheus the dashboards' queries (evaluated as Grafana would, by
fioprobe.preview.evaluate) return both clusters apart, and the alerts the clusters evaluate
arrive with their cluster: cluster b's failure never shows as cluster a's.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from fioprobe.errors import FailureReason
from fioprobe.fio.model import Run
from fioprobe.fio.parse import parse_file
from fioprobe.gateway.transport import Transport
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.preview import evaluate
from fioprobe.publish.outcome import publish
from fioprobe.publish.statefile import StateDir
from support import services

pytestmark = pytest.mark.slow

RULES = REPO / "alerts" / "out" / "rules.yaml"
KEYS = (
    {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": "control-plane-0"},
    {"storageclass": "gp3", "profile": "etcd-fsync"},
    {"storageclass": "gp3", "profile": "randread-iops"},
)
CLUSTERS = ("a", "b")
#: The StorageClass of KEYS whose configuration says it holds etcd, as the manifests' etcd
#: probes publish it (fioprobe_info{etcd_disk}): the etcd disks dashboard selects by it.
ETCD_DISK = "etcd-disk"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir = tmp_path_factory.mktemp("multicluster")
    started: list[services.Service] = []
    try:
        central = services.prometheus(workdir / "central", {})
        central.command.append("--web.enable-remote-write-receiver")
        started.append(central.start(timeout=60))
        gateways = {}
        for cluster in CLUSTERS:
            gateway = services.pushgateway(workdir / f"pgw-{cluster}")
            started.append(gateway.start())
            gateways[cluster] = gateway
            prometheus = services.prometheus(
                workdir / f"prom-{cluster}",
                {"pushgateway": f"{services.LOCALHOST}:{gateway.port}"},
                rule_files=[RULES],
                external_labels={"cluster": cluster},
            )
            _remote_write(prometheus, central.url + "/api/v1/write")
            started.append(prometheus.start(timeout=60))
        start = time.time()
        _push_rounds(workdir, gateways)
        # Both clusters' series, recorded rules and pending alerts have reached the center.
        services.wait_for(
            lambda: (
                _clusters(central.url, "fioprobe_runs_total") == {"a", "b"}
                and _clusters(central.url, 'ALERTS{alertname="FioProbeFailing"}') == {"b"}
                and _clusters(central.url, "probe:push_time_seconds:max") == {"a", "b"}
            ),
            timeout=90,
            what="both clusters at the central Prometheus",
        )
        yield {"central": central.url, "start": start, "end": time.time()}
    finally:
        for service in reversed(started):
            service.stop()


def _remote_write(prometheus: services.Service, url: str) -> None:
    (arg,) = [a for a in prometheus.command if a.startswith("--config.file=")]
    path = Path(arg.split("=", 1)[1])
    config = json.loads(path.read_text())
    config["remote_write"] = [{"url": url, "queue_config": {"batch_send_deadline": "1s"}}]
    path.write_text(json.dumps(config, indent=2))


def _push_rounds(workdir: Path, gateways: dict[str, services.Service]) -> None:
    """Three runs per group and cluster a few seconds apart (rates need two samples); the
    last run of cluster b fails."""
    run = _fio_fsync_run(workdir)
    ok = ProbeOutcome(run, success=True, duration_seconds=1.0, volume_type="gp3")
    for number in range(3):
        for cluster, gateway in gateways.items():
            transport = Transport(gateway.url)
            failing = cluster == "b" and number == 2
            outcome = ok.failed(FailureReason.IO_ERROR) if failing else ok
            for key in KEYS:
                directory = StateDir(workdir / "state" / cluster, create_parents=True)
                role = replace(outcome, etcd_disk=key["storageclass"] == ETCD_DISK)
                publish(role, key, transport, directory.group_file(key))
        time.sleep(3)


def _fio_fsync_run(workdir: Path) -> Run:
    """A small real fio run of the etcd-fsync kind (the dashboards' fsync panels need it)."""
    directory = workdir / "fio"
    directory.mkdir()
    output = directory / "out.json"
    subprocess.run(
        ["fio", "--name=fsync", f"--directory={directory}", "--rw=write", "--bs=2300",
         "--size=128k", "--fdatasync=1", "--output-format=json+", f"--output={output}"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return parse_file(output)


def _clusters(prometheus: str, promql: str) -> set[str]:
    return {str(s["metric"].get("cluster")) for s in services.query(prometheus, promql)}


def _series_clusters(results: dict[str, Any]) -> tuple[set[str | None], int]:
    """The cluster label of every series any panel returned, and how many series."""
    found: set[str | None] = set()
    count = 0
    for record in results["dashboards"].values():
        for panel in record["panels"]:
            for target in panel["targets"]:
                for series in target["result"]:
                    count += 1
                    found.add(series.get("metric", {}).get("cluster"))
    return found, count


def test_dashboards_show_each_cluster_apart(fleet: dict[str, Any]) -> None:
    per_cluster = {}
    for cluster in CLUSTERS:
        results = evaluate.collect_results(
            fleet["central"], fleet["start"], fleet["end"], prefer={"cluster": cluster}
        )
        overview = results["dashboards"]["fioprobe-overview.json"]
        assert sorted(overview["options"]["cluster"]) == ["a", "b"]
        assert overview["variables"]["cluster"] == cluster
        found, count = _series_clusters(results)
        assert count > 0
        # A series either names the chosen cluster or aggregated it away *within* it (every
        # query matches cluster=~"$cluster" first); never the other cluster.
        assert found <= {cluster, None}, found
        per_cluster[cluster] = results
    # The panels on probe health differ between the clusters: b's last runs failed (3
    # failing probes there), a's did not.
    success = {
        cluster: [
            float(series["value"][1]) if "value" in series else float(series["values"][-1][1])
            for panel in results["dashboards"]["fioprobe-overview.json"]["panels"]
            for target in panel["targets"]
            if "fioprobe_success" in target["expr"]
            for series in target["result"]
        ]
        for cluster, results in per_cluster.items()
    }
    assert success["a"] and success["b"]
    assert success["a"] != success["b"], success


def test_alerts_arrive_per_cluster(fleet: dict[str, Any]) -> None:
    central = fleet["central"]
    alerts = services.query(central, "ALERTS")
    assert alerts, "no alert reached the central Prometheus"
    for alert in alerts:
        assert alert["metric"].get("cluster") in CLUSTERS, alert["metric"]
    failing = services.query(central, 'ALERTS{alertname="FioProbeFailing"}')
    assert {(s["metric"]["cluster"], s["metric"]["storageclass"]) for s in failing} == {
        ("b", key["storageclass"]) for key in KEYS
    }
    # Recorded series of both clusters stay apart: one per cluster and group.
    recorded = services.query(central, "probe:push_time_seconds:max")
    assert len(recorded) == len(CLUSTERS) * len(KEYS)
    assert {s["metric"]["cluster"] for s in recorded} == set(CLUSTERS)
