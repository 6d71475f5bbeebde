"""`fioprobe gc` and the provisioning probe's groups (job="fioprobe_provision"), against a
real Pushgateway: a class no given configuration lists under `provision.storage_classes` goes,
with the rules gc applies to the fio probes' groups (owners, writer conflicts, nodes,
replicas, --dry-run, --unowned).

The groups are pushed by the provisioning probe's own publish path (`publish_provision`, with
its state files, writer identity and push ids) from hand-built run results: what
`fioprobe provision` pushes, without a cluster to run on.
"""

from __future__ import annotations

import ast
import json
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import fioprobe
from fioprobe.gateway.api import push
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import provision_key
from fioprobe.metrics.provision import ProvisionOutcome
from fioprobe.provision.objects import Mode, StorageClassInfo
from fioprobe.provision.runner import RunResult
from fioprobe.provision.workload import RunSpec
from fioprobe.publish.outcome import WriterConflict
from fioprobe.publish.provision import publish_provision, state_file
from fioprobe.publish.statefile import StateDir
from prometheus_client import CollectorRegistry, Gauge
from support import services
from support.gc_owner import OWNER, groups, write_config

JOB = "fioprobe_provision"


def provision_config(
    path: Path, gateway: services.Service, classes: list[str] | None, *, targets: bool = True
) -> Path:
    """OWNER's configuration (support.gc_owner's: gp3 and node-local etcd probes), with a
    `provision:` section listing `classes` (None: no section); without its targets when
    `targets` is false."""
    write_config(path, gateway)
    document = json.loads(path.read_text())
    if classes is not None:
        document["provision"] = {"storage_classes": classes}
    if not targets:
        del document["targets"]
    path.write_text(json.dumps(document))
    return path


def published(
    gateway: services.Service,
    state: Path,
    storageclass: str,
    node: str | None = None,
    owner: str = OWNER,
    *,
    lease: float = 3600.0,
) -> None:
    """One run of `storageclass` (on `node`) pushed as `fioprobe provision --owner` does,
    its state in `state`. WriterConflict when another state's writer owns the group."""
    spec = RunSpec(owner=owner, storage_class=storageclass, namespace="ns", size="1Gi",
                   image="img", node=node)  # fmt: skip
    info = StorageClassInfo(storageclass, "ebs.csi.aws.com", Mode.IMMEDIATE, True, "gp3")
    result = RunResult(spec, "run1", Mode.IMMEDIATE, (), (), None, None, (), (), (), info)
    key = provision_key(storageclass, node)
    file = state_file(StateDir(state, create_parents=True), key)
    outcome = ProvisionOutcome(result, time.time(), owner=owner)
    publish_provision(outcome, key, Transport(gateway.url, attempts=1), file, lease_seconds=lease)


def ordered(keys: list[dict[str, str]]) -> list[dict[str, str]]:
    """Grouping keys in one order, whatever order they were listed in."""
    return sorted(keys, key=lambda g: sorted(g.items()))


def provision_groups(gateway: services.Service) -> list[dict[str, str]]:
    """The provisioning groups' keys (labels minus job), `ordered`."""
    return ordered([{k: v for k, v in g.items() if k != "job"} for g in groups(gateway)
                    if g["job"] == JOB])  # fmt: skip


def shown(**key: str) -> str:
    """A provisioning group's key as gc prints it: its job first."""
    return str({"job": JOB, **key})


def deleted_keys(stdout: bytes, verb: str = "deleted") -> list[dict[str, str]]:
    lines = stdout.decode().splitlines()
    assert all(line.startswith(f"{verb} {{") for line in lines), lines
    return ordered([ast.literal_eval(line.removeprefix(f"{verb} ")) for line in lines])


@pytest.fixture
def populated(pushgateway: services.Service, tmp_path: Path) -> services.Service:
    state = tmp_path / "state"
    for storageclass, node in (("gp3", None), ("io2", None), ("local-nvme", "n1"),
                               ("local-nvme", "n2"), ("retired-nvme", "n1")):  # fmt: skip
        published(pushgateway, state, storageclass, node)
    published(pushgateway, tmp_path / "team-b", "io2-b", owner="team-b")
    # A fio probe's group of the same owner and class: kept, it is configured.
    registry = CollectorRegistry()
    Gauge("fioprobe_owner_info", "test", ["owner"], registry=registry).labels(OWNER).set(1)
    push(Transport(pushgateway.url, attempts=1), {"storageclass": "gp3", "profile": "etcd-fsync"},
         registry)  # fmt: skip
    # A job="fioprobe_provision" group of another shape, pushed by hand: never gc's.
    push(Transport(pushgateway.url, attempts=1), {"storageclass": "gp3", "profile": "x"},
         registry, job=JOB)  # fmt: skip
    return pushgateway


def test_the_classes_no_configuration_lists_go_and_nothing_else(
    populated: services.Service, tmp_path: Path
) -> None:
    config = provision_config(tmp_path / "config.yaml", populated, ["gp3", "local-nvme"])
    before = groups(populated)
    dry = fioprobe("gc", "--config", str(config), "--dry-run")
    assert dry.returncode == 0, dry.stderr.decode()
    gone = [{"job": JOB, "storageclass": "io2"},
            {"job": JOB, "storageclass": "retired-nvme", "node": "n1"}]  # fmt: skip
    assert deleted_keys(dry.stdout, "would delete") == ordered(gone)
    assert groups(populated) == before
    err = dry.stderr.decode()
    assert "would delete 2 groups, kept 4; left alone 1 of other owners (team-b)" in err
    [foreign] = [line for line in err.splitlines() if "not a fioprobe grouping key" in line]
    assert f"'job': '{JOB}'" in foreign and "'profile': 'x'" in foreign, foreign

    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    assert sorted(result.stdout.decode().splitlines()) == sorted(
        [f"deleted {shown(storageclass='io2')}",
         f"deleted {shown(storageclass='retired-nvme', node='n1')}"]
    )  # fmt: skip
    assert provision_groups(populated) == ordered([
        {"storageclass": "gp3"}, {"storageclass": "gp3", "profile": "x"},
        {"storageclass": "io2-b"},
        {"storageclass": "local-nvme", "node": "n1"}, {"storageclass": "local-nvme", "node": "n2"},
    ])  # fmt: skip
    assert {"job": "fioprobe", "storageclass": "gp3", "profile": "etcd-fsync"} in groups(populated)

    # Node-bound classes follow --node as node-local probes do.
    nodes = fioprobe("gc", "--config", str(config), "--node", "n1", "--node", "n3")
    assert nodes.returncode == 0, nodes.stderr.decode()
    assert nodes.stdout.decode().splitlines() == [
        f"deleted {shown(storageclass='local-nvme', node='n2')}"
    ]
    again = fioprobe("gc", "--config", str(config), "--node", "n1")
    assert again.returncode == 0 and again.stdout == b"", again.stderr.decode()


def test_a_configuration_without_provision_lists_no_class(
    populated: services.Service, tmp_path: Path
) -> None:
    """Every provisioning group of its owner goes; its fio probes' groups stay, and so does
    every group of another owner."""
    config = provision_config(tmp_path / "config.yaml", populated, None)
    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    assert len(result.stdout.decode().splitlines()) == 5
    assert provision_groups(populated) == ordered([
        {"storageclass": "gp3", "profile": "x"}, {"storageclass": "io2-b"}
    ])  # fmt: skip
    assert {"job": "fioprobe", "storageclass": "gp3", "profile": "etcd-fsync"} in groups(populated)


def test_the_provisioning_owners_configuration_needs_no_target(
    populated: services.Service, tmp_path: Path
) -> None:
    """As deployed: the provisioning CronJob has an owner of its own, and gc is given a
    configuration of that owner that lists its classes and runs no fio probe. Given
    together with the fio probes' configuration of another owner, each keeps its own."""
    provisioning = tmp_path / "provisioning.yaml"
    provisioning.write_text(json.dumps({
        "owner": "team-b", "pushgateway": {"url": populated.url, "attempts": 1},
        "provision": {"storage_classes": ["gp3"]},
    }))  # fmt: skip
    probes = provision_config(tmp_path / "probes.yaml", populated, ["io2-b"])
    result = fioprobe("gc", "--config", str(provisioning), "--config", str(probes), "--dry-run")
    assert result.returncode == 0, result.stderr.decode()
    # io2-b is team-b's and listed (by the other configuration: the lists are joined); gp3 is
    # listed; OWNER's io2 and node-bound classes are not.
    assert deleted_keys(result.stdout, "would delete") == ordered(
        [{"job": JOB, "storageclass": "io2"},
         {"job": JOB, "storageclass": "local-nvme", "node": "n1"},
         {"job": JOB, "storageclass": "local-nvme", "node": "n2"},
         {"job": JOB, "storageclass": "retired-nvme", "node": "n1"}]
    )  # fmt: skip
    alone = fioprobe("gc", "--config", str(provisioning))
    assert alone.returncode == 0, alone.stderr.decode()
    assert alone.stdout.decode().splitlines() == [f"deleted {shown(storageclass='io2-b')}"]
    assert f"left alone 6 of other owners ({OWNER})" in alone.stderr.decode()


def test_writer_conflicts_and_unowned_groups_as_for_the_probes(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    """A refused writer's conflict group (the provisioning publish path's own) is kept while
    fresh and goes once older than the lease, or at once when its class is not listed; an
    unowned group only with --unowned."""
    lease = 5.0  # longer than gc's start after the pushes: the first gc sees them fresh
    config = provision_config(tmp_path / "config.yaml", pushgateway, ["gp3"])
    document = json.loads(config.read_text())
    document["pushgateway"]["writer_lease_seconds"] = lease
    config.write_text(json.dumps(document))
    for storageclass in ("gp3", "io2"):
        published(pushgateway, tmp_path / "a", storageclass, lease=lease)
        published(pushgateway, tmp_path / "a", storageclass, lease=lease)  # a's state owns it
        with pytest.raises(WriterConflict):
            published(pushgateway, tmp_path / "b", storageclass, lease=lease)
    conflicts = [g for g in provision_groups(pushgateway) if "writer" in g]
    assert sorted(g["storageclass"] for g in conflicts) == ["gp3", "io2"]
    registry = CollectorRegistry()
    Gauge("fioprobe_provision_success", "test", registry=registry).set(1)
    push(Transport(pushgateway.url, attempts=1), {"storageclass": "old"}, registry, job=JOB)

    fresh = fioprobe("gc", "--config", str(config))
    assert fresh.returncode == 0, fresh.stderr.decode()
    [io2_conflict] = [g for g in conflicts if g["storageclass"] == "io2"]
    assert deleted_keys(fresh.stdout) == ordered(
        [{"job": JOB, "storageclass": "io2"}, {"job": JOB, **io2_conflict}]
    )
    assert "1 without an owner (see --unowned)" in fresh.stderr.decode()
    [gp3_conflict] = [g for g in conflicts if g["storageclass"] == "gp3"]
    assert gp3_conflict in provision_groups(pushgateway)  # fresh: FioProbeFailing's to report

    time.sleep(lease + 1)
    stale = fioprobe("gc", "--config", str(config), "--unowned")
    assert stale.returncode == 0, stale.stderr.decode()
    assert deleted_keys(stale.stdout) == ordered(
        [{"job": JOB, **gp3_conflict}, {"job": JOB, "storageclass": "old"}]
    )
    assert provision_groups(pushgateway) == [{"storageclass": "gp3"}]


# --- replicas -------------------------------------------------------------------------------


@pytest.fixture
def two_gateways(tmp_path: Path):
    started = [services.pushgateway(tmp_path / name).start() for name in ("pgw-a", "pgw-b")]
    try:
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def _provision_copy(gateway: services.Service, runs: int, failures: int) -> None:
    registry = CollectorRegistry()
    Gauge("fioprobe_provision_runs_total", "test", registry=registry).set(runs)
    Gauge("fioprobe_provision_failures_total", "test", registry=registry).set(failures)
    Gauge("fioprobe_owner_info", "test", ["owner"], registry=registry).labels(OWNER).set(1)
    push(Transport(gateway.url, attempts=1), {"storageclass": "gp3"}, registry, job=JOB)


def _runs_on(gateway: services.Service) -> float | None:
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        for group in json.load(response)["data"]:
            if group["labels"] == {"job": JOB, "storageclass": "gp3"}:
                return float(group["fioprobe_provision_runs_total"]["metrics"][0]["value"])
    return None


def test_copies_on_two_replicas_are_ordered_by_the_provisioning_counters(
    two_gateways: list[services.Service], tmp_path: Path
) -> None:
    """The newer copy behind in its own counters (two writers diverged) keeps both; once it
    is ahead, the older copy goes. The fio probes' counters, which these groups do not have,
    would order nothing."""
    a, b = two_gateways
    path = provision_config(tmp_path / "config.yaml", a, ["gp3"])
    document = json.loads(path.read_text())
    document["pushgateway"] = {"shards": [a.url, b.url], "attempts": 1}
    path.write_text(json.dumps(document))
    _provision_copy(b, runs=7, failures=1)
    time.sleep(1.1)  # a later push time, by the gateways' (one machine's) clock
    _provision_copy(a, runs=5, failures=0)
    kept = fioprobe("gc", "--config", str(path))
    assert kept.returncode == 0 and kept.stdout == b"", kept.stderr.decode()
    assert f"kept every copy of {shown(storageclass='gp3')}" in kept.stderr.decode()
    assert (_runs_on(a), _runs_on(b)) == (5, 7)

    _provision_copy(a, runs=8, failures=1)
    result = fioprobe("gc", "--config", str(path))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [
        f"deleted {shown(storageclass='gp3')} on {b.url} (old copy of a group that moved)"
    ]
    assert (_runs_on(a), _runs_on(b)) == (8, None)
