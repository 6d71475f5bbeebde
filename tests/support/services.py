"""Real Pushgateway, Prometheus, Alertmanager and etcd processes for tests and benchmarks.

The first three come from the demo's launcher in the package (`fioprobe.services.servers`), so
a test starts them exactly as `fioprobe demo` does. etcd, its write load and `wait_for` are
only needed here: they stay out of the package and its wheel. Every process gets a free port
on 127.0.0.1 and is stopped by PID; every wait is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fioprobe.services.servers import (
    LOCALHOST,
    Service,
    ServiceError,
    alertmanager,
    free_port,
    prometheus,
    prometheus_api,
    pushgateway,
    query,
)
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "LOCALHOST",
    "REQUEST_S",
    "EtcdWriteLoad",
    "Service",
    "ServiceError",
    "alertmanager",
    "etcd",
    "free_port",
    "prometheus",
    "prometheus_api",
    "pushgateway",
    "query",
    "wait_for",
]

T = TypeVar("T")

#: How long a test gives one request to a live service of its own. A Pushgateway on 127.0.0.1
#: answers in milliseconds, but the tests that gave it 5 s and one attempt each failed once on
#: a 2-core machine loaded by other suites (not reproduced since); a service that is down
#: refuses at once, so a long timeout costs a test nothing where it expects a refusal.
REQUEST_S = 30.0


#: Samples of one scrape: {(name, sorted labels): value}.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, timeout: float = 5.0) -> Samples:
    """Every sample of a /metrics page, as Prometheus would read it."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def etcd(workdir: Path, data_dir: Path) -> Service:
    """An etcd member alone, its data in `data_dir`: the fidelity benchmark and the API
    server tests need the real fsync pattern and the real v3 API."""
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
