"""Start real Pushgateway, Prometheus, Alertmanager and etcd processes on 127.0.0.1.

Used by `fioprobe demo` and by the tests: every process gets a free port, its own data
directory, a bounded wait until it answers, and is stopped by PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

LOCALHOST = "127.0.0.1"
T = TypeVar("T")


class ServiceError(RuntimeError):
    """A component did not start or answer in time."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return sock.getsockname()[1]


@dataclass
class Service:
    name: str
    command: list[str]
    port: int
    workdir: Path
    ready_path: str = "/-/ready"
    scheme: str = "http"
    #: For a component behind TLS and basic auth (a web config file): how the readiness
    #: probe trusts its certificate and which headers (Authorization) it sends.
    ready_context: ssl.SSLContext | None = field(default=None, repr=False)
    ready_headers: dict[str, str] = field(default_factory=dict, repr=False)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{LOCALHOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self, timeout: float = 30.0, ready: bool = True) -> Service:
        binary = shutil.which(self.command[0])
        if binary is None:
            raise ServiceError(f"{self.command[0]} is not installed (run `make setup`)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [binary, *self.command[1:]],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
            )
        if ready:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServiceError(f"{self.name} exited {self.process.returncode}: {self.tail()}")
            try:
                request = urllib.request.Request(
                    self.url + self.ready_path, headers=self.ready_headers
                )
                with urllib.request.urlopen(
                    request, timeout=2, context=self.ready_context
                ) as response:
                    if response.status == 200:
                        self._check_still_ours()
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise ServiceError(f"{self.name} did not answer on {self.url} within {timeout}s")

    def _check_still_ours(self) -> None:
        """The port came from free_port(), which releases it before we bind it: another
        process (a concurrent test run) may have taken it, and then it answered our readiness
        check while our process failed to bind and exits. Give that exit a moment to show."""
        time.sleep(0.3)
        if self.process is not None and self.process.poll() is not None:
            raise ServiceError(
                f"{self.name} exited {self.process.returncode} after {self.url} answered: "
                f"the port was probably taken by another process ({self.tail()})"
            )

    def stop(self, timeout: float = 10.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=timeout)
                return
            except subprocess.TimeoutExpired:
                continue

    def tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def pushgateway(
    workdir: Path,
    *,
    persistence: Path | None = None,
    web_config: Path | None = None,
    port: int | None = None,
) -> Service:
    """A Pushgateway; with `persistence`, its metrics survive a restart."""
    port = port or free_port()
    command = ["prometheus-pushgateway", f"--web.listen-address={LOCALHOST}:{port}"]
    # Debian's build defaults --persistence.file to /var/lib/prometheus/pushgateway.data,
    # shared by every instance on the machine: always say explicitly which file, or none.
    command.append(f"--persistence.file={persistence or ''}")
    if persistence is not None:
        command.append("--persistence.interval=1s")
    if web_config is not None:
        command.append(f"--web.config.file={web_config}")
    return Service("pushgateway", command, port, workdir)


def prometheus(
    workdir: Path,
    scrape_targets: dict[str, str],
    *,
    scrape_interval: str = "1s",
    rule_files: list[Path] | None = None,
    alertmanager_url: str | None = None,
    external_labels: dict[str, str] | None = None,
    evaluation_interval: str = "1s",
    target_labels: dict[str, str] | None = None,
) -> Service:
    """A Prometheus scraping `scrape_targets` ({job: host:port}) with honor_labels.

    `target_labels` are added to every scraped series that lacks them (e.g. the `cluster`
    label a multi-cluster setup has, which the dashboards' variables select on).
    """
    port = free_port()
    config: dict[str, object] = {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval,
            "external_labels": external_labels or {},
        },
        "scrape_configs": [
            {
                "job_name": job,
                "honor_labels": True,
                "static_configs": [{"targets": [target], "labels": target_labels or {}}],
            }
            for job, target in scrape_targets.items()
        ],
    }
    if rule_files:
        config["rule_files"] = [str(path) for path in rule_files]
    if alertmanager_url:
        host = urllib.parse.urlparse(alertmanager_url).netloc
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    command = [
        "prometheus",
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address={LOCALHOST}:{port}",
        "--web.enable-lifecycle",
    ]
    return Service("prometheus", command, port, workdir)


def alertmanager(workdir: Path, webhook_url: str | None = None) -> Service:
    port = free_port()
    receiver: dict[str, object] = {"name": "default"}
    if webhook_url:
        receiver["webhook_configs"] = [{"url": webhook_url}]
    config = {
        "route": {"receiver": "default", "group_wait": "1s", "group_interval": "1s"},
        "receivers": [receiver],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(json.dumps(config))
    command = [
        "prometheus-alertmanager",
        f"--config.file={config_path}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address={LOCALHOST}:{port}",
        "--cluster.listen-address=",  # no gossip: nothing but loopback
    ]
    return Service("alertmanager", command, port, workdir)


def etcd(workdir: Path, data_dir: Path) -> Service:
    client, peer = free_port(), free_port()
    command = [
        "etcd",
        f"--data-dir={data_dir}",
        f"--listen-client-urls=http://{LOCALHOST}:{client}",
        f"--advertise-client-urls=http://{LOCALHOST}:{client}",
        f"--listen-peer-urls=http://{LOCALHOST}:{peer}",
        f"--initial-advertise-peer-urls=http://{LOCALHOST}:{peer}",
        f"--initial-cluster=default=http://{LOCALHOST}:{peer}",
        "--name=default",
    ]
    return Service("etcd", command, client, workdir, ready_path="/health")


def prometheus_api(
    prometheus_url: str, path: str, params: dict[str, str] | list[tuple[str, str]]
) -> object:
    """GET one Prometheus HTTP API endpoint; its `data`, or ServiceError with its error."""
    url = f"{prometheus_url}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        raise ServiceError(f"{path} {params}: HTTP {exc.code}: {exc.read(500)!r}") from None
    if body.get("status") != "success":
        raise ServiceError(f"{path} {params}: {body}")
    return body["data"]


def query(prometheus_url: str, promql: str, at: float | None = None) -> list[dict[str, object]]:
    """Instant query; returns the result vector (raises ServiceError on an API error)."""
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    return prometheus_api(prometheus_url, "/api/v1/query", params)["result"]


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 30.0,
    what: str = "condition",
    interval: float = 0.25,
) -> T:
    """Poll `predicate` until it returns something truthy; TimeoutError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class EtcdWriteLoad:
    """A paced, bounded put loop against etcd's v3 HTTP gateway, in a background thread.

    Why: etcd fsyncs its WAL once per committed write, so without writes its own
    etcd_disk_wal_fsync_duration_seconds histogram stays empty. Sequential puts are one WAL
    append and one fdatasync each, like a steady apiserver write stream. Bounded by count
    and time, stopped on exit; client-side put latencies are kept as a cross-check.
    """

    def __init__(
        self,
        url: str,
        *,
        rate: float,
        max_seconds: float,
        max_puts: int | None = None,
        value_bytes: int = 64,
        key_prefix: str = "fioprobe/load/",
        keys: int = 64,
    ) -> None:
        self.url = url
        self.interval = 1.0 / rate
        self.max_puts = max_puts if max_puts is not None else int(rate * max_seconds) + 1
        self.max_seconds = max_seconds
        self.value_bytes = value_bytes
        self.key_prefix = key_prefix
        self.keys = keys
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="etcd-load", daemon=True)

    @property
    def puts(self) -> int:
        """Puts that succeeded."""
        return len(self.latencies)

    def _run(self) -> None:
        value = base64.b64encode(os.urandom(self.value_bytes)).decode()
        deadline = time.monotonic() + self.max_seconds
        next_at = time.monotonic()
        sent = 0
        while not self._stop.is_set() and sent < self.max_puts and time.monotonic() < deadline:
            now = time.monotonic()
            if now < next_at:
                self._stop.wait(next_at - now)
                continue
            next_at = max(next_at + self.interval, now)
            key = base64.b64encode(f"{self.key_prefix}{sent % self.keys}".encode()).decode()
            request = urllib.request.Request(
                self.url + "/v3/kv/put",
                data=json.dumps({"key": key, "value": value}).encode(),
                headers={"Content-Type": "application/json"},
            )
            sent += 1
            started = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    response.read()
                self.latencies.append(time.monotonic() - started)
            except (urllib.error.URLError, OSError) as exc:
                self.errors.append(str(exc))
                if len(self.errors) > 50:
                    return
                self._stop.wait(0.1)

    def start(self) -> EtcdWriteLoad:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and wait for the put in flight (bounded by its 10 s timeout)."""
        self._stop.set()
        self._thread.join(timeout=15)

    def __enter__(self) -> EtcdWriteLoad:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
