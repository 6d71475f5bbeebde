"""`helm upgrade` from the chart as its users have it (tests/e2e/data: the chart at 438fcbc, whose
etcd probes are CronJobs on named nodes) to this checkout's, with the same values file
(old-values.yaml: etcd.nodes set). scripts/e2e/run.sh installed the old chart as its README
said (namespaces and node directories made by hand).

Across the switch: the probes' grouping keys stay the same (storageclass, profile, node), no
probe runs twice in one interval (the old CronJob's run and the new DaemonSet pod's), no gap
longer than the new pod's wait for its next interval, no Stale or Missing alert is even pending,
the data stays (the Pushgateway's volume, the StorageClass probe's volume, the node's state
files), and the old CronJobs are gone."""

from __future__ import annotations

import itertools
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import (
    ETCD_NAMESPACE,
    NAMESPACE,
    NODE,
    REPO,
    Kube,
    Measurements,
    find_group,
    group_value,
    helm,
    pushgateway_groups,
)
from support import services

CHART = REPO / "charts" / "fioprobe"
OLD_VALUES = Path(__file__).with_name("old-values.yaml")
RELEASE = "fioprobe"
#: The old chart's interval (its everyMinutes default; it rendered only 5, 10 and 15).
INTERVAL = 300
ETCD_KEY = {"storageclass": "etcd-disk", "profile": "etcd-fsync", "node": NODE}
CLASS_KEY = {"storageclass": "local-path", "profile": "etcd-fsync"}
STATE_DIR = Path("/var/lib/fioprobe/state")
#: Alerts that a clean switch must never raise, not even as pending.
SWITCH_ALERTS = "FioProbeStale|FioProbeMissing|FioProbeFailing"


def key_of(group: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(group["labels"].items()))


class RunWatch:
    """Every run of a group the Pushgateway shows, polled every 2 s: (start, push time), the
    start being the push time less the run's fioprobe_duration_seconds."""

    def __init__(self, url: str, keys: list[dict[str, str]]) -> None:
        self.url = url
        self.keys = keys
        self.runs: dict[str, set[tuple[float, float]]] = {str(k): set() for k in keys}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(2.0):
            for key in self.keys:
                try:
                    group = find_group(self.url, **key)
                except (OSError, ValueError):  # unreachable, or a body cut short
                    continue
                pushed = group and group_value(group, "push_time_seconds")
                duration = group and group_value(group, "fioprobe_duration_seconds")
                if pushed:
                    self.runs[str(key)].add((round(pushed - (duration or 0.0), 1), pushed))

    def start(self) -> RunWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def of(self, key: dict[str, str]) -> list[tuple[float, float]]:
        return sorted(self.runs[str(key)])


@pytest.fixture(scope="module")
def watch(pushgateway_url: str) -> Any:
    runs = RunWatch(pushgateway_url, [ETCD_KEY, CLASS_KEY]).start()
    yield runs
    runs.stop()


def test_the_old_chart_probes_its_named_etcd_node(
    kube: Kube, pushgateway_url: str, applied_at: float, watch: RunWatch
) -> None:
    """The starting point: the old chart's CronJobs (one per named etcd node) have pushed."""
    cronjobs = kube.json("cronjob", "-n", ETCD_NAMESPACE)["items"]
    assert [c["metadata"]["name"] for c in cronjobs] == [f"fioprobe-etcd-{NODE}"], cronjobs
    for key in (ETCD_KEY, CLASS_KEY):
        group = services.wait_for(
            lambda key=key: find_group(pushgateway_url, **key),
            max(1.0, applied_at + 2 * INTERVAL + 120 - time.time()),
            f"the old chart's probe {key}",
            2,
        )
        assert group_value(group, "fioprobe_success") == 1, group


def test_the_upgrade_keeps_keys_data_and_cadence(
    kube: Kube,
    run_dir: Path,
    pushgateway_url: str,
    prometheus: Any,
    rules_file: Path,
    watch: RunWatch,
    measurements: Measurements,
) -> None:
    keys_before = {key_of(g) for g in pushgateway_groups(pushgateway_url)}
    volumes_before = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in kube.json("pvc", "-n", NAMESPACE)["items"]
    }
    state_before = {p.name for p in STATE_DIR.iterdir()}
    assert state_before, "the old etcd probe kept no state on the node"
    # Before its first push each probe was (rightly) Missing, pending: the switch starts from
    # a quiet state, so that what the check at the end sees is the switch's own doing.
    switch_alerts = f'ALERTS{{alertname=~"{SWITCH_ALERTS}"}}'
    services.wait_for(
        lambda: not services.query(prometheus.url, switch_alerts),
        120,
        "no probe-health alert before the upgrade",
        2,
    )

    upgraded_at = time.time()
    helm(run_dir, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(OLD_VALUES))
    assert not kube.json("cronjob", "-n", ETCD_NAMESPACE)["items"], "an old etcd CronJob is left"
    assert kube.json("daemonset", "-n", ETCD_NAMESPACE, "fioprobe-etcd")
    # Prometheus evaluates the new chart's rules from now on, as the operator would reload them.
    rules = kube.json("prometheusrule", "-n", NAMESPACE)["items"]
    rules_file.write_text(
        yaml.safe_dump({"groups": [g for r in rules for g in r["spec"]["groups"]]})
    )
    request = urllib.request.Request(prometheus.url + "/-/reload", method="POST")
    with urllib.request.urlopen(request, timeout=30):
        pass

    # The new pod runs from the interval after the one it started in: two runs of each probe
    # after the upgrade show the new cadence, within three intervals and a margin.
    def two_runs_after() -> bool:
        return all(
            sum(1 for start, _ in watch.of(key) if start > upgraded_at) >= 2
            for key in (ETCD_KEY, CLASS_KEY)
        )

    services.wait_for(two_runs_after, 3 * INTERVAL + 120, "two runs of each probe after it", 5)
    observed = time.time() - upgraded_at
    measurements.record("upgrade_observed_seconds", round(observed, 1))

    for key in (ETCD_KEY, CLASS_KEY):
        runs = watch.of(key)
        intervals = [int(start // INTERVAL) for start, _ in runs]
        assert len(intervals) == len(set(intervals)), (key, "two runs in one interval", runs)
        pushes = [pushed for _, pushed in runs]
        gaps = [b - a for a, b in itertools.pairwise(pushes)]
        # The old CronJob's last run, then the new pod's first, in the interval after the
        # one it started in: never two whole intervals without a push.
        assert max(gaps) < 2 * INTERVAL, (key, gaps)
        measurements.record(f"upgrade_longest_gap_seconds{{{key['storageclass']}}}", max(gaps))
    group = find_group(pushgateway_url, **ETCD_KEY)
    assert group and group_value(group, "fioprobe_success") == 1, group
    assert group["fioprobe_info"]["metrics"][0]["labels"]["etcd_disk"] == "true", group

    # The grouping keys did not change: no new group, none left behind.
    assert {key_of(g) for g in pushgateway_groups(pushgateway_url)} == keys_before
    # The data stayed: the same volumes (not recreated), the node's state files.
    volumes_after = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in kube.json("pvc", "-n", NAMESPACE)["items"]
    }
    assert volumes_after == volumes_before
    assert state_before <= {p.name for p in STATE_DIR.iterdir()}
    # No probe-health alert, not even pending, at any evaluation since the upgrade.
    window = int(time.time() - upgraded_at)
    raised = services.query(prometheus.url, f"max_over_time({switch_alerts}[{window}s])")
    assert not raised, [r["metric"] for r in raised]
