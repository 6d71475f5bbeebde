"""Fixtures of the Ceph scenarios: one real single-host Ceph cluster for test_scenarios.py
(support.ceph), one RBD image with ext4 on it for the probes and the stream, a Pushgateway,
the continuous stream on the same volume, and a Prometheus scraping both with the mixin's
rules (rendered in the test, never a committed copy). test_comparison.py builds a cluster of
its own, after or before this one, never beside it.

These tests need root and the Ceph packages that `make ceph` (scripts/ceph/run.sh) installs;
anywhere else (`make test`) the directory is not collected at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import ceph, services

REPO = Path(__file__).resolve().parents[2]
#: The label of the scenarios' StorageClass, and the volume type whose thresholds apply.
STORAGECLASS = "ceph-rbd"
#: How often the test Prometheus scrapes and evaluates (the mixin's rules assume 15 s
#: scrapes of the stream; faster scrapes only make what is seen sooner).
SCRAPE = "5s"


def ceph_root() -> Path:
    root = os.environ.get("FIOPROBE_CEPH_ROOT")
    if not root:
        pytest.fail("FIOPROBE_CEPH_ROOT is not set: run the Ceph scenarios with `make ceph`")
    if os.geteuid() != 0:
        pytest.fail("the Ceph scenarios need root (loop devices, mounts): run `make ceph`")
    missing = ceph.missing_tools()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run scripts/ceph/setup.sh")
    return Path(root)


@dataclass
class Bed:
    """Everything a scenario uses, made once per module."""

    root: Path
    cluster: ceph.Cluster
    volume: ceph.Volume
    gateway: services.Service
    prometheus: services.Service
    stream: subprocess.Popen[bytes]
    stream_port: int
    config: Path

    @property
    def probe_dir(self) -> Path:
        return self.volume.mountpoint / "probe"

    @property
    def stream_dir(self) -> Path:
        return self.volume.mountpoint / "stream"

    def scrape_stream(self) -> services.Samples:
        return services.scrape(f"http://{services.LOCALHOST}:{self.stream_port}/metrics")

    def stream_value(self, name: str, **labels: str) -> float:
        found = [
            v for (n, ls), v in self.scrape_stream().items()
            if n == name and set(labels.items()) <= set(ls)
        ]  # fmt: skip
        return sum(found)

    def stream_slow_syncs(self) -> float:
        """The stream's fdatasyncs above 10 ms: count minus the 10 ms bucket."""
        name = "fioprobe_continuous_sync_latency_seconds"
        return self.stream_value(f"{name}_count") - self.stream_value(f"{name}_bucket", le="0.01")

    def stream_file(self) -> Path:
        (path,) = (self.stream_dir / ".fioprobe-continuous").glob("wal-*")
        return path

    def group(self) -> dict[str, list[dict[str, Any]]]:
        """The probe's group on the Pushgateway (its JSON API): {metric: [entries]}."""
        with urllib.request.urlopen(self.gateway.url + "/api/v1/metrics", timeout=10) as answer:
            groups = json.load(answer)["data"]
        labels = {"job": "fioprobe", "storageclass": STORAGECLASS, "profile": "etcd-fsync"}
        for group in groups:
            if group["labels"] == labels:
                return {
                    name: family["metrics"]
                    for name, family in group.items()
                    if isinstance(family, dict) and "metrics" in family
                }
        return {}

    def gauge(self, name: str) -> float:
        (metric,) = self.group()[name]
        return float(metric["value"])

    def reason(self) -> str:
        """The failure reason the last push gave ("" after a success)."""
        infos = self.group().get("fioprobe_failure_reason_info", [])
        return str(infos[0]["labels"]["reason"]) if infos else ""

    def last_quantile(self, quantile: str) -> float:
        """A quantile of the last run's fsync latency (fio's own percentile), in seconds."""
        (summary,) = self.group()["fioprobe_last_sync_latency_seconds"]
        return float(summary["quantiles"][quantile])

    def slow_fsyncs_pushed(self, above: str = "0.01") -> float:
        """The probe's fsyncs slower than the bucket `above` (seconds, as the `le` label),
        all runs so far: the pushed cumulative histogram's count minus that bucket."""
        (histogram,) = self.group()["fioprobe_sync_latency_seconds"]
        return float(histogram["count"]) - float(histogram["buckets"][above])

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = services.query(self.prometheus.url, expr)
        return result

    def scrape_report(self, *series: str) -> str:
        """What Prometheus has of its scrapes and of `series`: each target's health and last
        error, and the samples of the last 3 minutes, to tell a scrape that failed from a
        sample that never came."""
        targets = services.prometheus_api(self.prometheus.url, "/api/v1/targets", {})
        lines = [
            f"target {t['scrapeUrl']}: health {t['health']}, last error "
            f"{t.get('lastError', '')!r}, last scrape {t.get('lastScrape', '?')}"
            for t in targets["activeTargets"]
        ]
        for selector in series:
            found_any = self.query(f"{selector}[3m]")
            if not found_any:
                lines.append(f"{selector}: no series in the last 3 minutes")
            for found in found_any:
                values = " ".join(f"{at:.0f}={value}" for at, value in found.get("values", []))
                lines.append(f"{selector} {found['metric']}: {values}")
        lines.append(f"now {time.time():.0f}")
        return "\n".join(lines)

    def alerts(self) -> dict[str, str]:
        """{alertname: state} of the alerts Prometheus holds now (pending or firing)."""
        data = services.prometheus_api(self.prometheus.url, "/api/v1/alerts", {})
        return {a["labels"]["alertname"]: a["state"] for a in data["alerts"]}

    def record(self, scenario: str, **facts: Any) -> None:
        record(scenario, **facts)


#: What the scenarios recorded in this session, by scenario.
RESULTS: dict[str, dict[str, Any]] = {}


def record(scenario: str, **facts: Any) -> None:
    """Facts of a scenario for docs/CEPH.md, written to FIOPROBE_CEPH_RESULTS if set."""
    RESULTS.setdefault(scenario, {}).update(facts)
    out = os.environ.get("FIOPROBE_CEPH_RESULTS")
    if out:
        Path(out).write_text(json.dumps(RESULTS, indent=2, sort_keys=True) + "\n")


def render_rules(workdir: Path) -> Path:
    """The mixin's rules as they ship (alerts/rules.jsonnet, default configuration)."""
    jsonnet = str(REPO / ".tools" / "bin" / "go-jsonnet")
    done = subprocess.run(
        [jsonnet, "-J", str(REPO), str(REPO / "alerts" / "rules.jsonnet")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    path = workdir / "rules.json"
    path.write_text(done.stdout)
    return path


def write_config(path: Path, gateway: services.Service, probe_dir: Path, state: Path) -> None:
    """`fioprobe run`'s configuration: the Ceph volume, as a CronJob of the manifests has it."""
    path.write_text(
        f"pushgateway: {{url: {gateway.url}, timeout_seconds: 10, attempts: 2}}\n"
        "targets:\n"
        f"  - name: {STORAGECLASS}\n"
        f"    directory: {probe_dir}\n"
        "    etcd_disk: false\n"
        "    require_mount_point: false\n"
        f"    state_dir: {state}\n"
        "    timeout_seconds: 30\n"
        "    volume: {type: ceph-rbd, size: 1Gi, provisioner: rbd.csi.ceph.com}\n"
        "    profiles: [etcd-fsync]\n"
    )


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    root = ceph_root()
    cluster = ceph.start_cluster(root / "cluster")
    volumes: list[ceph.Volume] = []
    started: list[services.Service] = []
    stream: subprocess.Popen[bytes] | None = None
    try:
        volume = ceph.make_volume(cluster, "probe", 1024)
        volumes.append(volume)
        for sub in ("probe", "stream"):
            (volume.mountpoint / sub).mkdir()
        gateway = services.pushgateway(root / "pushgateway").start()
        started.append(gateway)
        stream_port = services.free_port()
        with (root / "stream.log").open("wb") as log:
            stream = subprocess.Popen(
                [sys.executable, "-m", "fioprobe", "continuous", "--listen",
                 f"{services.LOCALHOST}:{stream_port}", "--dir", str(volume.mountpoint / "stream"),
                 "--storageclass", STORAGECLASS, "--no-etcd-disk"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO,
            )  # fmt: skip
        prometheus = services.prometheus(
            root / "prometheus",
            {
                "pushgateway": f"{services.LOCALHOST}:{gateway.port}",
                "continuous": f"{services.LOCALHOST}:{stream_port}",
            },
            scrape_interval=SCRAPE,
            evaluation_interval=SCRAPE,
            rule_files=[render_rules(root)],
        ).start()
        started.append(prometheus)
        config = root / "run.yaml"
        state = root / "state"
        state.mkdir(mode=0o700)
        write_config(config, gateway, volume.mountpoint / "probe", state)
        yield Bed(root, cluster, volume, gateway, prometheus, stream, stream_port, config)
    finally:

        def stop_users() -> None:
            if stream is not None and stream.poll() is None:
                stream.send_signal(signal.SIGTERM)
                try:
                    stream.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    stream.kill()
                    stream.wait(timeout=30)
            for service in reversed(started):
                service.stop()

        problems = ceph.teardown(cluster, volumes, stop_users)
        if problems:
            print("ceph teardown:", *problems, sep="\n  ", file=sys.stderr)


def wait_until(
    what: str,
    check: Any,
    timeout: float,
    step: float = 1.0,
    explain: Callable[[], str] | None = None,
) -> float:
    """Poll `check()` until true; the seconds it took. Fails with `what` after `timeout`, and
    with what `explain()` then says (the state behind the check, for a failure seen once)."""
    started = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - started
        except (OSError, services.ServiceError, ceph.CephError):
            pass
        if time.monotonic() - started > timeout:
            detail = ""
            if explain is not None:
                try:
                    detail = "\n" + explain()
                except Exception as exc:  # the failure stands; the explanation is a bonus
                    detail = f"\n(no explanation: {exc!r})"
            pytest.fail(f"not within {timeout:.0f} s: {what}{detail}")
        time.sleep(step)
