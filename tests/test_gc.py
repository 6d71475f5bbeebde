"""`fioprobe gc` against a real Pushgateway: removed probes' groups go, the rest stays."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from conftest import fioprobe
from fioprobe import services
from fioprobe.pushgateway import Transport, push
from prometheus_client import CollectorRegistry, Gauge

CONFIGURED = [
    {"storageclass": "gp3", "profile": "etcd-fsync"},
    {"storageclass": "gp3", "profile": "randread-iops"},
    {"storageclass": "etcd", "profile": "etcd-fsync", "node": "cp-1"},
    {"storageclass": "etcd", "profile": "etcd-fsync", "node": "cp-2"},
]
REMOVED = [
    {"storageclass": "gp3", "profile": "seqread-bw"},  # profile dropped from a target
    {"storageclass": "gp2-old", "profile": "etcd-fsync"},  # target dropped
    {"storageclass": "gp3", "profile": "etcd-fsync", "node": "cp-1"},  # gp3 is not node-local
    {"storageclass": "etcd", "profile": "etcd-fsync"},  # etcd is node-local only
    {"storageclass": "etcd", "profile": "randread-iops", "node": "cp-1"},
]


def write_config(path: Path, gateway: services.Service) -> Path:
    path.write_text(
        json.dumps(
            {
                "pushgateway": {"url": gateway.url, "attempts": 1},
                "targets": [
                    {"name": "gp3", "directory": "/probe", "profiles": ["etcd-fsync",
                     "randread-iops"]},
                    {"name": "etcd", "directory": "/var/lib/etcd-probe", "node_local": True,
                     "profiles": ["etcd-fsync"]},
                ],
            }
        )
    )  # fmt: skip
    return path


def push_group(gateway: services.Service, key: dict[str, str], **extra: str) -> None:
    registry = CollectorRegistry()
    Gauge("fioprobe_success", "test", registry=registry).set(1)
    push(Transport(gateway.url, attempts=1), {**key, **extra}, registry)


def groups(gateway: services.Service) -> list[dict[str, str]]:
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        labels = [group["labels"] for group in json.load(response)["data"]]
    return sorted(labels, key=lambda g: sorted(g.items()))  # the API's order is not stable


def keys(labels: list[dict[str, str]]) -> list[dict[str, str]]:
    """Sorted, comparable grouping keys (labels minus job) of fioprobe groups."""
    found = [{k: v for k, v in g.items() if k != "job"} for g in labels if g["job"] == "fioprobe"]
    return sorted(found, key=lambda g: sorted(g.items()))


@pytest.fixture
def populated(pushgateway: services.Service) -> services.Service:
    for key in CONFIGURED + REMOVED:
        push_group(pushgateway, key)
    push_group(pushgateway, {"storageclass": "gp2-old", "profile": "x"}, instance="by-hand")
    # Another job's group, pushed by someone else: never fioprobe's business.
    request = urllib.request.Request(
        pushgateway.url + "/metrics/job/other/storageclass/gp2-old",
        data=b"some_metric 1\n",
        method="PUT",
    )
    urllib.request.urlopen(request, timeout=5).close()
    return pushgateway


def test_dry_run_lists_and_deletes_nothing(populated: services.Service, tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.yaml", populated)
    before = groups(populated)
    result = fioprobe("gc", "--config", str(config), "--dry-run")
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert sorted(lines) == sorted(f"would delete {key}" for key in REMOVED)
    assert "would delete 5 groups, kept 4" in result.stderr.decode()
    assert "left alone (not a fioprobe grouping key)" in result.stderr.decode()
    assert groups(populated) == before


def test_gc_deletes_exactly_the_removed_probes(populated: services.Service, tmp_path: Path):
    config = write_config(tmp_path / "config.yaml", populated)
    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    assert sorted(result.stdout.decode().splitlines()) == sorted(
        f"deleted {key}" for key in REMOVED
    )
    remaining = groups(populated)
    foreign = {"job": "fioprobe", "storageclass": "gp2-old", "profile": "x", "instance": "by-hand"}
    assert keys([g for g in remaining if g != foreign]) == keys(
        [{"job": "fioprobe", **key} for key in CONFIGURED]
    )
    assert foreign in remaining
    assert {"job": "other", "storageclass": "gp2-old"} in remaining

    # Idempotent: a second run finds nothing to delete.
    again = fioprobe("gc", "--config", str(config))
    assert again.returncode == 0 and again.stdout == b""

    # With the list of nodes that still exist, node-local groups of other nodes go too.
    nodes = fioprobe("gc", "--config", str(config), "--node", "cp-1", "--node", "cp-3")
    assert nodes.returncode == 0, nodes.stderr.decode()
    assert nodes.stdout.decode().splitlines() == [
        "deleted {'storageclass': 'etcd', 'profile': 'etcd-fsync', 'node': 'cp-2'}"
    ]
    assert {"job": "fioprobe", "storageclass": "etcd", "profile": "etcd-fsync", "node": "cp-1"} in (
        groups(populated)
    )


def test_gc_unreachable_gateway_is_a_push_failure(tmp_path: Path) -> None:
    gateway = services.pushgateway(tmp_path / "never-started")  # nothing listens on its port
    config = write_config(tmp_path / "config.yaml", gateway)
    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 4
    assert f"cannot reach {gateway.url}" in result.stderr.decode()
