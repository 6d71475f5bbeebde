"""A Prometheus restart, with the real Prometheus: what docs/MIXIN.md promises.

The mixin's rules at a 4-second probe interval (every window and `for` scales with it) run in a
real Prometheus that scrapes a real Pushgateway. A probe group whose runs fail is pushed every
interval (as a probe does: its run counter and success gauge), so FioProbeFailing goes pending
and fires; Prometheus is stopped and started again on the same storage while one probe's alert
fires and another's is pending. Started with `--rules.alert.for-grace-period` no longer than
the alert's `for`, as the docs tell users to, the firing alert is firing again at the first
evaluation after the restart with its original start time, and the pending one keeps its start
time and fires when it would have without the restart. With Prometheus' default grace period
(10 minutes, longer than this `for`) the pending one starts over: the reason for the advice.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO
from support import services
from support.paths import GO_JSONNET

pytestmark = pytest.mark.slow

INTERVAL_S = 4
#: FioProbeFailing's `for` at this interval: (failingRuns - 1) intervals plus half of one.
FAILING_FOR_S = 2 * INTERVAL_S + INTERVAL_S / 2
FIRING, PENDING = "gp3-firing", "gp3-pending"


def render_rules(path: Path) -> Path:
    config = json.dumps({"probeIntervalSeconds": INTERVAL_S})
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "--tla-code", f"config={config}",
         str(REPO / "alerts" / "rules.jsonnet")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path.write_text(proc.stdout)
    return path


class FailingProbes:
    """Pushes each StorageClass's failing run every INTERVAL_S, like a probe whose runs fail:
    bounded in time, stopped on exit."""

    def __init__(self, gateway: str, max_seconds: float) -> None:
        self.gateway = gateway
        self.max_seconds = max_seconds
        self.storageclasses: list[str] = []
        self.runs: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failing-probes", daemon=True)

    def add(self, storageclass: str) -> None:
        self.storageclasses.append(storageclass)
        self.push(storageclass)

    def push(self, storageclass: str) -> None:
        self.runs[storageclass] = self.runs.get(storageclass, 0) + 1
        body = (
            "# TYPE fioprobe_success gauge\nfioprobe_success 0\n"
            "# TYPE fioprobe_runs_total counter\n"
            f"fioprobe_runs_total {self.runs[storageclass]}\n"
            "# TYPE fioprobe_failures_total counter\n"
            f"fioprobe_failures_total {self.runs[storageclass]}\n"
        )
        url = f"{self.gateway}/metrics/job/fioprobe/storageclass/{storageclass}/profile/etcd-fsync"
        request = urllib.request.Request(url, data=body.encode(), method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status in (200, 202)

    def _run(self) -> None:
        deadline = time.monotonic() + self.max_seconds
        while not self._stop.wait(INTERVAL_S) and time.monotonic() < deadline:
            for storageclass in list(self.storageclasses):
                self.push(storageclass)

    def __enter__(self) -> FailingProbes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def alerts(url: str) -> dict[str, dict[str, object]]:
    """FioProbeFailing's alerts by StorageClass: state and activeAt."""
    found = services.prometheus_api(url, "/api/v1/alerts", {})["alerts"]  # type: ignore[index]
    return {
        a["labels"]["storageclass"]: a
        for a in found
        if a["labels"]["alertname"] == "FioProbeFailing"
    }


def active_at(alert: dict[str, object]) -> float:
    """RFC 3339 activeAt as Unix time."""
    from datetime import datetime

    return datetime.fromisoformat(str(alert["activeAt"]).replace("Z", "+00:00")).timestamp()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[services.Service, list[str]]]:
    gateway = services.pushgateway(tmp_path / "pushgateway").start()
    try:
        yield gateway, [str(render_rules(tmp_path / "rules.json"))]
    finally:
        gateway.stop()


def start_prometheus(
    tmp_path: Path, gateway: services.Service, rules: list[str], grace: str | None
) -> services.Service:
    prometheus = services.prometheus(
        tmp_path / "prometheus",
        {"pushgateway": f"{services.LOCALHOST}:{gateway.port}"},
        rule_files=[Path(r) for r in rules],
    )
    if grace is not None:
        prometheus.command.append(f"--rules.alert.for-grace-period={grace}")
    return prometheus


@pytest.mark.parametrize(
    ("grace", "kept"), [("1s", True), (None, False)], ids=["grace-1s", "default"]
)
def test_a_prometheus_restart_keeps_firing_and_pending_alerts(
    tmp_path: Path, stack: tuple[services.Service, list[str]], grace: str | None, kept: bool
) -> None:
    gateway, rules = stack
    prometheus = start_prometheus(tmp_path, gateway, rules, grace).start(timeout=60)
    try:
        with FailingProbes(gateway.url, max_seconds=240) as probes:
            probes.add(FIRING)
            firing = services.wait_for(
                lambda: alerts(prometheus.url).get(FIRING, {}).get("state") == "firing"
                and alerts(prometheus.url)[FIRING],
                timeout=90, what="FioProbeFailing firing",
            )  # fmt: skip
            probes.add(PENDING)
            pending = services.wait_for(
                lambda: alerts(prometheus.url).get(PENDING),
                timeout=30, what="the second FioProbeFailing pending",
            )  # fmt: skip
            assert pending["state"] == "pending"
            started = active_at(pending)
            stopped = time.time()
            prometheus.stop()
            time.sleep(2)
            prometheus.start(timeout=60)
            ready = time.time()
            # The firing alert is firing again within the first evaluations after the restart
            # (the first one restores its state, from ALERTS_FOR_STATE), with its original
            # start time: Alertmanager, which last heard of it before the restart with an end
            # minutes ahead, sees no resolution.
            back = services.wait_for(
                lambda: alerts(prometheus.url).get(FIRING, {}).get("state") == "firing"
                and alerts(prometheus.url)[FIRING],
                timeout=60, what="FioProbeFailing firing again after the restart",
            )  # fmt: skip
            fired = services.wait_for(
                lambda: alerts(prometheus.url).get(PENDING, {}).get("state") == "firing"
                and alerts(prometheus.url)[PENDING],
                timeout=90, what="the pending alert firing",
            )  # fmt: skip
            if kept:
                # Firing again within the first evaluations, from its original start.
                assert time.time() - ready < 10 + FAILING_FOR_S
                assert abs(active_at(back) - active_at(firing)) < 1.5
                # Pending: its start moves by the downtime, no more (Prometheus counts only
                # the time it watched), so it fires that much later, not a whole `for` later.
                shift = active_at(fired) - started
                assert 0 <= shift <= (ready - stopped) + 2, (shift, ready - stopped)
            else:
                # Both started over at the restart: a whole `for` of silence.
                assert active_at(back) >= stopped
                assert active_at(fired) >= stopped
    finally:
        prometheus.stop()
