"""Real fio json+ -> `fioprobe push` -> real Pushgateway -> real Prometheus (honor_labels)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import fioprobe, run_fio_json_plus, wait_for
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS
from support import services

pytestmark = pytest.mark.slow


def gateway_value(gateway: services.Service, series: str) -> float | None:
    """One series' value from the Pushgateway's own /metrics page."""
    import urllib.request

    with urllib.request.urlopen(gateway.url + "/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(series + " ") or line.startswith(series + "{"):
                name, _, value = line.rpartition(" ")
                if name == series or name.startswith(series + "{"):
                    return float(value)
    return None


def push(path: Path, gateway: services.Service, *extra: str):
    return fioprobe("push", str(path), "--gateway", gateway.url, "--storageclass", "local",
                    "--profile", "etcd-fsync", "--quiet", *extra)  # fmt: skip


def test_histogram_quantile_matches_fio_p99(
    tmp_path: Path, state_dir: Path, pushgateway: services.Service, prometheus_for
) -> None:
    work = tmp_path / "fio"
    work.mkdir()
    output = run_fio_json_plus(
        work, "--ioengine=sync", "--rw=write", "--bs=2300", "--fdatasync=1", "--size=2m",
        name="etcd-fsync",
    )  # fmt: skip
    sync = json.loads(output.read_text())["jobs"][0]["sync"]["lat_ns"]
    result = push(output, pushgateway)
    assert result.returncode == 0, result.stderr.decode()

    prometheus = prometheus_for({"pushgateway": f"127.0.0.1:{pushgateway.port}"})
    selector = '{job="fioprobe",storageclass="local",profile="etcd-fsync"}'
    wait_for(
        lambda: services.query(prometheus.url, f"fioprobe_sync_latency_seconds_count{selector}"),
        what="Prometheus to scrape the pushed histogram",
    )
    (p99,) = services.query(
        prometheus.url,
        f"histogram_quantile(0.99, sum by (le) (fioprobe_sync_latency_seconds_bucket{selector}))",
    )
    quantile = float(p99["value"][1])
    fio_p99 = sync["percentile"]["99.000000"] / 1e9
    bounds = [0.0, *LATENCY_BUCKETS_SECONDS, math.inf]

    def bucket_of(value: float) -> int:
        return next(i for i in range(1, len(bounds)) if value <= bounds[i])

    assert bucket_of(quantile) == bucket_of(fio_p99), (quantile, fio_p99)

    # le="0.01" counts exactly the samples fio binned at or below 10 ms.
    at_or_below_10ms = sum(c for k, c in sync["bins"].items() if int(k) <= 10_000_000)
    (bucket,) = services.query(
        prometheus.url, f'fioprobe_sync_latency_seconds_bucket{{le="0.01",{selector[1:]}'
    )
    assert float(bucket["value"][1]) == at_or_below_10ms
    (count,) = services.query(prometheus.url, f"fioprobe_sync_latency_seconds_count{selector}")
    assert float(count["value"][1]) == sync["N"]
    # honor_labels kept the pushed job label; no timestamps were pushed.
    assert count["metric"]["job"] == "fioprobe"


def test_push_twice_doubles_and_failed_push_is_carried(
    tmp_path: Path, state_dir: Path, pushgateway: services.Service
) -> None:
    work = tmp_path / "fio"
    work.mkdir()
    output = run_fio_json_plus(work, "--rw=write", "--bs=4k", "--size=1m", "--fsync=1",
                               name="etcd-fsync")  # fmt: skip
    doc = json.loads(output.read_text())
    n = doc["jobs"][0]["sync"]["lat_ns"]["N"]
    written = doc["jobs"][0]["write"]["io_bytes"]
    series = 'fioprobe_sync_latency_seconds_count{instance="",job="fioprobe",profile="etcd-fsync",storageclass="local"}'  # noqa: E501

    assert push(output, pushgateway).returncode == 0
    assert gateway_value(pushgateway, series) == n
    assert push(output, pushgateway).returncode == 0
    assert gateway_value(pushgateway, series) == 2 * n
    runs = (
        'fioprobe_runs_total{instance="",job="fioprobe",profile="etcd-fsync",storageclass="local"}'
    )
    assert gateway_value(pushgateway, runs) == 2
    written_series = runs.replace("fioprobe_runs_total", "fioprobe_written_bytes_total")
    assert gateway_value(pushgateway, written_series) == 2 * written

    # Pushgateway down: a clean failure, exit 4, one line naming the gateway.
    pushgateway.stop()
    failed = push(output, pushgateway, "--attempts", "2")
    assert failed.returncode == 4
    message = failed.stderr.decode().strip()
    assert message.count("\n") == 0
    assert f"cannot reach {pushgateway.url}" in message and "Connection refused" in message

    # Back on the same port: the next push carries the failed run too (4 runs in all).
    pushgateway.start()
    assert gateway_value(pushgateway, series) is None  # a fresh gateway without persistence
    assert push(output, pushgateway).returncode == 0
    assert gateway_value(pushgateway, series) == 4 * n
    assert gateway_value(pushgateway, runs) == 4


SYNC_COUNT = 'fioprobe_sync_latency_seconds_count{instance="",job="fioprobe",profile="etcd-fsync",storageclass="local"}'  # noqa: E501


@pytest.fixture
def small_result(tmp_path: Path) -> tuple[Path, int]:
    """A small real fio json+ result with fsyncs, and its fsync count N."""
    work = tmp_path / "fio"
    work.mkdir()
    output = run_fio_json_plus(work, "--rw=write", "--bs=4k", "--size=512k", "--fsync=1",
                               name="etcd-fsync")  # fmt: skip
    return output, json.loads(output.read_text())["jobs"][0]["sync"]["lat_ns"]["N"]


def test_without_state_file_totals_are_read_back_from_gateway(
    tmp_path: Path, pushgateway: services.Service, small_result: tuple[Path, int]
) -> None:
    """A fresh container has no state: the previous totals come from the Pushgateway."""
    output, n = small_result
    series = SYNC_COUNT
    for round_number in (1, 2, 3):
        fresh_state = tmp_path / f"container{round_number}"
        result = push(output, pushgateway, "--state", str(fresh_state / "state.json"))
        assert result.returncode == 0, result.stderr.decode()
        assert gateway_value(pushgateway, series) == round_number * n


def test_gateway_down_without_state_keeps_the_run_until_readback(
    tmp_path: Path, pushgateway: services.Service, small_result: tuple[Path, int]
) -> None:
    """No state and no gateway: the run is saved and added once the old totals are readable."""
    output, n = small_result
    series = SYNC_COUNT
    assert push(output, pushgateway, "--state", str(tmp_path / "a.json")).returncode == 0
    pushgateway.stop()
    state = tmp_path / "b.json"
    assert push(output, pushgateway, "--state", str(state), "--attempts", "1").returncode == 4
    kept = json.loads(state.read_text())
    assert kept["totals"] is None and kept["pending"]["runs_total"] == 1
    pushgateway.start()
    # The gateway restarted empty; its totals are 0, so the kept run plus this one: 2 runs.
    assert push(output, pushgateway, "--state", str(state)).returncode == 0
    assert gateway_value(pushgateway, series) == 2 * n
