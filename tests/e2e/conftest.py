"""Fixtures of the end-to-end scenarios: the cluster of scripts/e2e/cluster.sh, its kubectl, the
Pushgateway through its ClusterIP, and a Prometheus and Alertmanager on this machine with the
mixin's rules from the applied PrometheusRule.

These tests need the cluster that `make e2e` (scripts/e2e/run.sh) brings up; anywhere else
(`make test`) the directory is not collected at all.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

RUN_DIR = os.environ.get("FIOPROBE_E2E_RUN", "")
IN_E2E = bool(RUN_DIR) and Path(RUN_DIR, "admin.kubeconfig").is_file()
# Not under `make test`: nothing here can run without the cluster.
# `make e2e` runs the main suite (test_*.py here), then, on the same cluster once its objects are
# gone, the first install (first_install/) with one interval of each wait; `make
# e2e-first-install` runs the first install alone with four, `make e2e-upgrade` the upgrade from
# the chart at 438fcbc (scripts/e2e/run.sh sets FIOPROBE_E2E_SUITE for each pytest session).
SUITE = os.environ.get("FIOPROBE_E2E_SUITE", "main")
#: Each suite's tests: the main one's here, the others' in a folder of their own.
SUITE_TESTS = {"main": "test_*.py", "first-install": "first_install/*", "upgrade": "upgrade/*"}
collect_ignore_glob = [
    tests for suite, tests in SUITE_TESTS.items() if not IN_E2E or suite != SUITE
]

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".tools" / "kube" / "bin" / "kubectl"
NAMESPACE = "fioprobe"
ETCD_NAMESPACE = "fioprobe-etcd"
# The Helm chart's release, installed beside the manifests (scripts/e2e/run.sh).
HELM_RELEASE = "fioprobe-helm"
HELM_NAMESPACE = "fioprobe-helm"
# The cluster's one node (scripts/e2e/cluster.sh): a name no default of fioprobe mentions,
# labelled with the control-plane role, by which the etcd probes find it.
NODE = "e2e-cp-a"
# The StorageClasses of scripts/e2e/config.jsonnet whose disks have a fault (scripts/e2e/cluster.sh
# makes them): one whose fsyncs take 15 ms more, and two whose probes must fail, with the reason
# each must report.
SLOW_CLASS = "e2e-slow"


def continuous_targets_file(run_dir: Path) -> Path:
    """Where the continuous streams' pod addresses go for Prometheus' file discovery."""
    return run_dir / "prometheus-continuous-targets.json"


def metrics_ports(pod: dict[str, Any]) -> list[int]:
    """The pod's ports named `metrics`: what the PodMonitor and the scrape configuration select."""
    return [
        p["containerPort"]
        for c in pod["spec"]["containers"]
        for p in c.get("ports", [])
        if p.get("name") == "metrics"
    ]


class StreamDiscovery:
    """What the PodMonitor's pod discovery does in a cluster, for Debian's Prometheus (file
    discovery only): every few seconds the stream pods of `namespaces` that have an address
    and have not ended (the scrape configuration's selection: not Failed, not Succeeded), at
    their port named `metrics`, go into the targets file. A stream is scraped from when its pod
    runs, as in a cluster, and so is a replaced pod; a test that wrote the file once would
    scrape it only from when the test got there, while the release's rules count from the
    install. `stop` fails if the discovery stopped working."""

    COMPONENT = "app.kubernetes.io/component=continuous"
    #: One kubectl call; a pass makes one per namespace.
    CALL_SECONDS = 10

    def __init__(self, kube: Kube, path: Path, namespaces: tuple[str, ...]) -> None:
        self.kube, self.path, self.namespaces = kube, path, namespaces
        self.written = ""
        self.failures = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def targets(self) -> list[dict[str, Any]]:
        found = []
        for namespace in self.namespaces:
            listed = self.kube(
                "get", "pods", "-n", namespace, "-l", self.COMPONENT, "-o", "json",
                timeout=self.CALL_SECONDS,
            )  # fmt: skip
            for pod in json.loads(listed)["items"]:
                status = pod.get("status", {})
                ports = metrics_ports(pod)
                ended = status.get("phase") in ("Failed", "Succeeded")
                if status.get("podIP") and ports and not ended:
                    labels = {"namespace": namespace, "pod": pod["metadata"]["name"]}
                    found.append({"targets": [f"{status['podIP']}:{ports[0]}"], "labels": labels})
        return found

    def _run(self) -> None:
        while True:
            try:
                text = json.dumps(self.targets(), sort_keys=True)
                if text != self.written:
                    # Whole or not at all: Prometheus reads the file when it changes.
                    partial = self.path.with_suffix(".partial")
                    partial.write_text(text)
                    partial.replace(self.path)
                    self.written = text
                self.failures = 0
            except Exception as exc:  # kept for stop(), which fails on it
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            if self._stop.wait(5.0):
                return

    def start(self) -> StreamDiscovery:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=len(self.namespaces) * self.CALL_SECONDS + 30)
        assert not self._thread.is_alive(), "the stream discovery did not stop"
        # A pass that failed now and then is a busy API server; one that never works again is not.
        assert self.failures < 6, f"the stream discovery failed: {self.last_error}"


FAILING_CLASSES = {"e2e-full": "no_space", "e2e-readonly": "read_only"}
# The StorageClass of scripts/e2e/config.jsonnet with no volume behind it: its probe's pod never
# schedules, the deployed probe that is Missing.
UNBOUND_CLASS = "e2e-unbound"


class Kube:
    """kubectl against the e2e cluster, with bounded waits that say what they waited for."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.kubeconfig = run / "admin.kubeconfig"

    def __call__(
        self, *args: str, timeout: float = 60, check: bool = True, stdin: str | None = None
    ) -> str:
        result = subprocess.run(
            [str(KUBECTL), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self("get", *args, "-o", "json"))

    def wait(
        self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 2.0
    ) -> Any:
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError) as exc:
                last_error = f" (last error: {exc})"
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}{last_error}")
            time.sleep(interval)


@dataclass
class Measurements:
    path: Path

    def record(self, name: str, value: float | int | str) -> None:
        with self.path.open("a") as f:
            f.write(f"{name} {value}\n")


@pytest.fixture(scope="session")
def run_dir() -> Path:
    return Path(RUN_DIR)


@pytest.fixture(scope="session")
def kube(run_dir: Path) -> Kube:
    return Kube(run_dir)


@pytest.fixture(scope="session")
def measurements(run_dir: Path) -> Measurements:
    return Measurements(run_dir / "measurements")


@pytest.fixture(scope="session")
def applied_at(run_dir: Path) -> float:
    return float((run_dir / "applied-at").read_text())


@pytest.fixture(scope="session")
def manifests(run_dir: Path) -> list[dict[str, Any]]:
    """Every object that `kubectl apply -k` applied: the kustomization's files (generated/
    also holds a Prometheus scrape configuration, which is no object)."""
    docs: list[dict[str, Any]] = []
    kustomization = yaml.safe_load((run_dir / "manifests" / "kustomization.yaml").read_text())
    for resource in sorted(kustomization["resources"]):
        path = run_dir / "manifests" / resource
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


@pytest.fixture(scope="session")
def pushgateway_url(kube: Kube) -> str:
    """The Pushgateway's Service, reached on its ClusterIP (kube-proxy's rules on this host)."""
    service = kube.json("service", "-n", NAMESPACE, "fioprobe-pushgateway")
    port = service["spec"]["ports"][0]["port"]
    url = f"http://{service['spec']['clusterIP']}:{port}"
    kube.wait(lambda: http_get(url + "/-/ready"), 180, "the Pushgateway to be ready")
    return url


def http_get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


#: The etcd probes' DaemonSet (components/probes.libsonnet).
ETCD_DAEMONSET = "fioprobe-etcd"


def etcd_host_path(manifests: list[dict[str, Any]], volume: str) -> Path:
    """The host directory behind `volume` of the etcd probes' DaemonSet, as applied."""
    for doc in manifests:
        if (doc["kind"], doc["metadata"]["name"]) != ("DaemonSet", ETCD_DAEMONSET):
            continue
        spec = doc["spec"]["template"]["spec"]
        return Path(next(v["hostPath"]["path"] for v in spec["volumes"] if v["name"] == volume))
    raise AssertionError("the etcd probes' DaemonSet was not applied")


@pytest.fixture(scope="session")
def etcd_dir(manifests: list[dict[str, Any]]) -> Path:
    """The etcd probe directory on this node (the probed disk)."""
    return etcd_host_path(manifests, "probe")


@pytest.fixture(scope="session")
def state_dir(manifests: list[dict[str, Any]]) -> Path:
    """The node's state directory (stateHostPath), where the etcd probe keeps its state."""
    return etcd_host_path(manifests, "state")


def pushgateway_groups(url: str) -> list[dict[str, Any]]:
    """The Pushgateway's groups (its /api/v1/metrics): labels and metric families per group."""
    return json.loads(http_get(url + "/api/v1/metrics"))["data"]


def group_value(group: dict[str, Any], metric: str) -> float | None:
    family = group.get(metric)
    if not family or not family.get("metrics"):
        return None
    return float(family["metrics"][0]["value"])


def find_group(url: str, **labels: str) -> dict[str, Any] | None:
    for group in pushgateway_groups(url):
        if group["labels"] == {"job": "fioprobe", **labels}:
            return group
    return None


def expected_groups(manifests: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The grouping keys of every probe that can run on this cluster's node: node-local ones
    (the etcd disk) on the one node, and every StorageClass's but the unbound one's."""
    keys: list[dict[str, str]] = []
    for doc in manifests:
        if doc["kind"] != "ConfigMap" or doc["metadata"]["name"] != "fioprobe-config":
            continue
        for text in doc["data"].values():
            config = yaml.safe_load(text)
            for target in config["targets"]:
                if target["name"] == UNBOUND_CLASS:
                    continue
                for profile in target["profiles"]:
                    profile_name = profile if isinstance(profile, str) else profile["name"]
                    key = {"storageclass": target["name"], "profile": profile_name}
                    if target.get("node_local"):
                        key["node"] = NODE
                    keys.append(key)
    return keys


@pytest.fixture(scope="session")
def rules_file(kube: Kube, run_dir: Path) -> Path:
    """The applied PrometheusRules' groups, as the prometheus-operator would load them: the
    manifests' (the Helm release beside them, tests/e2e/test_30_helm.py, has the same groups in
    a namespace of its own, for a Prometheus of its own)."""
    rules = kube.json("prometheusrule", "-n", NAMESPACE)["items"]
    assert rules, "no PrometheusRule was applied"
    path = run_dir / "prometheus-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [g for r in rules for g in r["spec"]["groups"]]}))
    return path


def own_name(run_dir: Path, service: Any) -> Any:
    """Runs the service's program under a name of its own (a symbolic link in the run
    directory; the kernel names a process after the path it was started by): a
    `pkill -x prometheus` elsewhere on a shared machine must not end this run's."""
    binary = shutil.which(service.command[0])
    assert binary, f"{service.command[0]} is not installed"
    link = run_dir / "bin" / f"fioprobe-e2e-{service.name}"
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(binary)
    service.command[0] = str(link)
    return service


@pytest.fixture(scope="session")
def alertmanager(run_dir: Path) -> Iterator[Any]:
    from support import services

    service = own_name(run_dir, services.alertmanager(run_dir / "alertmanager")).start()
    yield service
    service.stop()


@pytest.fixture(scope="session", autouse=True)
def prometheus(
    run_dir: Path, pushgateway_url: str, rules_file: Path, alertmanager: Any
) -> Iterator[Any]:
    """Prometheus on this machine scraping the Pushgateway's ClusterIP with honor_labels, as
    the ServiceMonitor asks, with the mixin's rules and the Alertmanager above. Started before
    the first test: the "N of the last M runs" alerts count runs that Prometheus saw, so it
    must watch from the first run on, as it would in a cluster."""
    from support import services

    target = pushgateway_url.removeprefix("http://")
    # The continuous streams are scraped from their pods. Debian's Prometheus has no
    # Kubernetes discovery, so the pods' addresses go into a file (test_12_continuous writes
    # it once the pods run): what generated/continuous-scrape-config.yaml's pod discovery
    # and relabelling select, as file-based discovery.
    streams = continuous_targets_file(run_dir)
    streams.write_text("[]\n")
    service = own_name(
        run_dir,
        services.prometheus(
            run_dir / "prometheus",
            {"pushgateway": target},
            scrape_interval="5s",
            evaluation_interval="5s",
            rule_files=[rules_file],
            alertmanager_url=alertmanager.url,
            file_sd={"fioprobe-continuous": streams},
        ),
    ).start()
    yield service
    service.stop()


def alertmanager_alerts(url: str) -> list[dict[str, Any]]:
    """The alerts Alertmanager holds now (its API v2; resolved ones are not listed)."""
    return json.loads(http_get(url + "/api/v2/alerts"))


def find_alert(url: str, alertname: str, **labels: str) -> dict[str, Any] | None:
    for alert in alertmanager_alerts(url):
        if alert["labels"].get("alertname") == alertname and all(
            alert["labels"].get(k) == v for k, v in labels.items()
        ):
            return alert
    return None


def timestamp(text: str) -> float:
    """An RFC 3339 time of Alertmanager's API (nanoseconds cut to what Python reads)."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


class AlertTimes:
    """When each checked alert started firing (Alertmanager's startsAt), in seconds after
    `kubectl apply -k`; the earliest is the time to the first alert."""

    def __init__(self, applied_at: float) -> None:
        self.applied_at = applied_at
        self.seconds: dict[str, float] = {}

    def record(self, alert: dict[str, Any]) -> None:
        labels = alert["labels"]
        names = ("alertname", "severity", "storageclass", "node")
        key = ",".join(f"{k}={labels[k]}" for k in names if k in labels)
        self.seconds[key] = round(timestamp(alert["startsAt"]) - self.applied_at, 1)


@pytest.fixture(scope="session")
def alert_times(applied_at: float, measurements: Measurements) -> Iterator[AlertTimes]:
    times = AlertTimes(applied_at)
    yield times
    for key, seconds in sorted(times.seconds.items()):
        measurements.record(f"apply_to_alert_seconds{{{key}}}", seconds)
    if times.seconds:
        measurements.record("apply_to_first_alert_seconds", min(times.seconds.values()))


def pod_template(kube: Kube, namespace: str, cronjob: str) -> dict[str, Any]:
    return kube.json("cronjob", "-n", namespace, cronjob)["spec"]["jobTemplate"]["spec"]["template"]


def run_pod(
    kube: Kube,
    namespace: str,
    name: str,
    template: dict[str, Any],
    command: list[str],
    timeout: float = 180,
) -> tuple[str, str]:
    """Run a pod from a CronJob's pod template with another command; (phase, log)."""
    spec = json.loads(json.dumps(template["spec"]))
    spec["containers"][0]["command"] = command
    spec["containers"][0].pop("args", None)
    spec["restartPolicy"] = "Never"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": template["metadata"].get("labels", {}),
        },
        "spec": spec,
    }
    kube("delete", "pod", "-n", namespace, name, "--ignore-not-found", "--wait=true")
    kube("apply", "-f", "-", stdin=json.dumps(pod))

    def finished() -> str | None:
        phase = kube.json("pod", "-n", namespace, name)["status"].get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = kube.wait(finished, timeout, f"pod {namespace}/{name} to finish")
    log = kube("logs", "-n", namespace, name)
    kube("delete", "pod", "-n", namespace, name, "--wait=false")
    return phase, log


class PodMemorySampler:
    """Peak memory of every probe pod, read from its cgroup (v1: memory.max_usage_in_bytes
    of the pod's cgroup under kubepods) while it runs; pods are named by their CronJob's
    instance label. A thread samples once a second for the whole session."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.peaks: dict[str, int] = {}
        self.pods: dict[str, tuple[str, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _refresh_pods(self) -> None:
        for pod in self.kube.json("pod", "-A")["items"]:
            labels = pod["metadata"].get("labels", {})
            if labels.get("app.kubernetes.io/component") == "probe":
                self.pods[pod["metadata"]["uid"]] = (
                    labels.get("app.kubernetes.io/instance", "?"),
                    pod["metadata"]["name"],
                )

    def _run(self) -> None:
        root = Path("/sys/fs/cgroup/memory/kubepods")
        tick = 0
        while not self._stop.wait(1.0):
            if tick % 5 == 0:
                with contextlib.suppress(AssertionError, subprocess.TimeoutExpired, ValueError):
                    self._refresh_pods()
            tick += 1
            try:
                paths = list(root.glob("**/pod*/memory.max_usage_in_bytes"))
            except OSError:  # a pod's cgroup was removed while the tree was being listed
                continue
            for path in paths:
                uid = path.parent.name.removeprefix("pod")
                try:
                    value = int(path.read_text())
                except (OSError, ValueError):
                    continue
                self.peaks[uid] = max(self.peaks.get(uid, 0), value)

    def start(self) -> PodMemorySampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        """Peak bytes per probe CronJob instance (the largest of its pods)."""
        self._stop.set()
        self._thread.join(timeout=10)
        result: dict[str, int] = {}
        for uid, peak in self.peaks.items():
            if uid in self.pods:
                instance = self.pods[uid][0]
                result[instance] = max(result.get(instance, 0), peak)
        return result


@pytest.fixture(scope="session", autouse=True)
def pod_memory(kube: Kube, measurements: Measurements) -> Iterator[PodMemorySampler]:
    sampler = PodMemorySampler(kube).start()
    yield sampler
    for instance, peak in sorted(sampler.stop().items()):
        measurements.record(f"pod_peak_memory_bytes{{{instance}}}", peak)


HELM = REPO / ".tools" / "bin" / "helm"
#: Helm 4: run.sh installs the main suite's release with it, and the first install's tests
#: upgrade and uninstall a release Helm 3 installed with it.
HELM4 = REPO / ".tools" / "bin" / "helm4"


def helm(run_dir: Path, *args: str, timeout: float = 300, binary: Path = HELM) -> str:
    result = subprocess.run(
        [str(binary), "--kubeconfig", str(run_dir / "admin.kubeconfig"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr.strip()}"
    return result.stdout
