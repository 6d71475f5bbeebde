"""`fioprobe gc` against a real Pushgateway: removed probes' groups of the given owners go,
other owners' groups, unowned ones and fresh writer conflicts stay."""

from __future__ import annotations

import ast
import json
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, corpus_files, fioprobe
from fioprobe.gateway import shards
from fioprobe.gateway.api import push
from fioprobe.gateway.transport import Transport
from prometheus_client import CollectorRegistry, Gauge
from support import services
from support.gc_owner import OWNER, groups, write_config

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


def push_group(
    gateway: services.Service, key: dict[str, str], owner: str | None = OWNER, **extra: str
) -> None:
    """A group as a fioprobe push of `owner` leaves it (owner None: as before owners)."""
    registry = CollectorRegistry()
    Gauge("fioprobe_success", "test", registry=registry).set(1)
    if owner is not None:
        info = Gauge("fioprobe_owner_info", "test", ["owner"], registry=registry)
        info.labels(owner).set(1)
    push(Transport(gateway.url, attempts=1), {**key, **extra}, registry)


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
    assert "would delete 5 groups, kept 4; left alone 0 of other owners (none), 0 without" in (
        result.stderr.decode()
    )
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


def test_unowned_and_other_owners_groups_are_left_alone(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "config.yaml", pushgateway)
    before_owners = {"storageclass": "gp2-old", "profile": "etcd-fsync"}  # removed, unowned
    still_probed = {"storageclass": "gp3", "profile": "etcd-fsync"}  # configured, unowned
    theirs = {"storageclass": "gp2-team-b", "profile": "etcd-fsync"}
    push_group(pushgateway, before_owners, owner=None)
    push_group(pushgateway, still_probed, owner=None)
    push_group(pushgateway, theirs, owner="team-b")
    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b""
    assert "left alone 1 of other owners (team-b), 2 without an owner" in result.stderr.decode()
    assert len(keys(groups(pushgateway))) == 3

    # --unowned applies the configuration to groups from before owners; never to others'.
    result = fioprobe("gc", "--config", str(config), "--unowned")
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [f"deleted {before_owners}"]
    assert keys(groups(pushgateway)) == keys(
        [{"job": "fioprobe", **key} for key in (still_probed, theirs)]
    )


def run_config(path: Path, gateway: services.Service, owner: str | None, targets: dict) -> Path:
    """A configuration of real probes (tiny etcd-fsync runs) in folders under `path`'s."""
    entries = []
    for name, profiles in targets.items():
        directory = path.parent / f"probe-{name}"
        directory.mkdir(exist_ok=True)
        entries.append({"name": name, "directory": str(directory), "profiles": profiles})
    document = {"pushgateway": {"url": gateway.url, "attempts": 1}, "targets": entries}
    if owner is not None:
        document["owner"] = owner
    path.write_text(json.dumps(document))
    return path


TINY = {"name": "etcd-fsync", "size": "1m"}


def test_two_configurations_sharing_a_gateway(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    """As the shipped manifests deploy it: one configuration per StorageClass, each with its
    own owner. gc with one never deletes the other's groups; its own removed target goes."""
    gp2 = run_config(tmp_path / "gp2.yaml", pushgateway, "gp2", {"gp2": [TINY], "gp2-b": [TINY]})
    gp3 = run_config(tmp_path / "gp3.yaml", pushgateway, "gp3", {"gp3": [TINY]})
    for config in (gp2, gp3):
        ran = fioprobe("run", "--config", str(config))
        assert ran.returncode == 0, ran.stderr.decode()
    owners = {
        group["labels"]["storageclass"]: group["fioprobe_owner_info"]["metrics"][0]["labels"]
        for group in json.load(urllib.request.urlopen(pushgateway.url + "/api/v1/metrics"))["data"]
    }
    assert {name: labels["owner"] for name, labels in owners.items()} == {
        "gp2": "gp2",
        "gp2-b": "gp2",
        "gp3": "gp3",
    }
    for config in (gp2, gp3):
        result = fioprobe("gc", "--config", str(config))
        assert result.returncode == 0 and result.stdout == b"", result.stderr.decode()
    assert len(groups(pushgateway)) == 3

    # gp2-b is removed from its configuration: its group goes, gp3's stays.
    run_config(gp2, pushgateway, "gp2", {"gp2": [TINY]})
    result = fioprobe("gc", "--config", str(gp2))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [
        "deleted {'storageclass': 'gp2-b', 'profile': 'etcd-fsync'}"
    ]
    assert "left alone 1 of other owners (gp3)" in result.stderr.decode()
    assert [g["storageclass"] for g in keys(groups(pushgateway))] == ["gp2", "gp3"]


def test_configurations_of_one_owner_are_given_together(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    """Two configurations that name no owner share the default one: given together, gc
    keeps the probes of both."""
    one = run_config(tmp_path / "one.yaml", pushgateway, None, {"one": [TINY]})
    two = run_config(tmp_path / "two.yaml", pushgateway, None, {"two": [TINY]})
    for config in (one, two):
        assert fioprobe("run", "--config", str(config)).returncode == 0
    both = fioprobe("gc", "--config", str(one), "--config", str(two), "--dry-run")
    assert both.returncode == 0 and both.stdout == b"", both.stderr.decode()
    alone = fioprobe("gc", "--config", str(one), "--dry-run")
    assert alone.stdout.decode().splitlines() == [
        "would delete {'storageclass': 'two', 'profile': 'etcd-fsync'}"
    ]
    assert len(groups(pushgateway)) == 2


def test_stale_writer_conflict_groups_go_fresh_ones_stay(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    """Real refusals (publish/outcome.py): a second writer's push into a group another writer owns
    leaves a group with `writer`; gc deletes it once older than the writer lease."""
    lease = 4.0
    config = write_config(tmp_path / "config.yaml", pushgateway)
    document = json.loads(config.read_text())
    document["pushgateway"]["writer_lease_seconds"] = lease
    config.write_text(json.dumps(document))
    fio_output = str(corpus_files(negative=False)[0])
    group = ["--storageclass", "gp3", "--profile", "etcd-fsync"]

    def writer(name: str, *owner: str) -> int:
        state = str(tmp_path / f"state-{name}.json")
        return fioprobe(
            "push", fio_output, *group, "--gateway", pushgateway.url, "--state", state,
            "--writer-lease", str(lease), "--attempts", "1", "--quiet", *owner,
        ).returncode  # fmt: skip

    assert writer("a", "--owner", OWNER) == 0
    assert writer("a", "--owner", OWNER) == 0  # a state that outlived a run owns the group
    assert writer("b") == 1  # refused; a hand-run push without an owner
    [stale] = [g for g in keys(groups(pushgateway)) if "writer" in g]
    # Another owner's conflict beside it: never this configuration's business.
    push_group(pushgateway, {"storageclass": "gp2-x", "profile": "p", "writer": "w"}, "team-b")
    time.sleep(lease + 1)
    assert writer("a", "--owner", OWNER) == 0  # the owner goes on
    assert writer("c", "--owner", OWNER) == 1  # a fresh refusal
    conflicts = [g for g in keys(groups(pushgateway)) if "writer" in g]
    assert len(conflicts) == 3
    result = fioprobe("gc", "--config", str(config))
    assert result.returncode == 0, result.stderr.decode()
    [deleted] = result.stdout.decode().splitlines()
    assert ast.literal_eval(deleted.removeprefix("deleted ")) == stale
    remaining = [g for g in keys(groups(pushgateway)) if "writer" in g]
    assert stale not in remaining and len(remaining) == 2
    assert {"storageclass": "gp2-x", "profile": "p", "writer": "w"} in remaining


def test_configurations_of_different_gateways_are_refused(tmp_path: Path) -> None:
    one = write_config(tmp_path / "one.yaml", services.pushgateway(tmp_path / "a"))
    two = write_config(tmp_path / "two.yaml", services.pushgateway(tmp_path / "b"))
    result = fioprobe("gc", "--config", str(one), "--config", str(two))
    assert result.returncode == 2
    assert b"name different Pushgateways" in result.stderr


# --- replicas: gc with another replica list than the probes' --------------------------------


def _runs_on(gateway: services.Service, key: dict[str, str]) -> float | None:
    """fioprobe_runs_total of the group on this replica, None when it does not hold it."""
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        for group in json.load(response)["data"]:
            if group["labels"] == {"job": "fioprobe", **key}:
                return float(group["fioprobe_runs_total"]["metrics"][0]["value"])
    return None


@pytest.fixture
def two_gateways(tmp_path: Path):
    started = [services.pushgateway(tmp_path / name).start() for name in ("pgw-a", "pgw-b")]
    try:
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def test_gc_with_another_replica_list_keeps_the_live_copy(two_gateways, tmp_path: Path) -> None:
    """A rollback of the replicas: the probes went from [A, B] back to [A]; gc still has
    [A, B], where the group's own replica is B. B holds the stale copy (2 runs), A the live one
    (4 runs): gc deletes B's copy and keeps A's, so the counter Prometheus sees stays at 4."""
    a, b = two_gateways
    name = next(n for n in (f"sc-{i}" for i in range(256)) if shards.pick(
        [a.url, b.url], {"storageclass": n, "profile": "etcd-fsync"}) == 1)  # fmt: skip
    key = {"storageclass": name, "profile": "etcd-fsync"}
    directory = tmp_path / "probe"
    directory.mkdir()

    def config(file: str, replicas: list[str]) -> Path:
        document = {
            "owner": OWNER,
            "pushgateway": {"shards": replicas, "attempts": 1},
            "targets": [{"name": name, "directory": str(directory), "profiles": [TINY]}],
        }
        path = tmp_path / file
        path.write_text(json.dumps(document))
        return path

    wide, narrow = config("wide.yaml", [a.url, b.url]), config("narrow.yaml", [a.url])
    for path in (wide, wide, narrow, narrow):
        ran = fioprobe("run", "--config", str(path), "--quiet")
        assert ran.returncode == 0, ran.stderr.decode()
    assert (_runs_on(a, key), _runs_on(b, key)) == (4, 2)  # live on A, stale on B

    dry = fioprobe("gc", "--config", str(wide), "--dry-run")
    assert dry.returncode == 0, dry.stderr.decode()
    assert dry.stdout.decode().splitlines() == [
        f"would delete {key} on {b.url} (old copy of a group that moved)"
    ]
    result = fioprobe("gc", "--config", str(wide))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [
        f"deleted {key} on {b.url} (old copy of a group that moved)"
    ]
    assert (_runs_on(a, key), _runs_on(b, key)) == (4, None)


def _push_copy(gateway: services.Service, key: dict[str, str], runs: int) -> None:
    registry = CollectorRegistry()
    Gauge("fioprobe_runs_total", "test", registry=registry).set(runs)
    Gauge("fioprobe_owner_info", "test", ["owner"], registry=registry).labels(OWNER).set(1)
    push(Transport(gateway.url, attempts=1), key, registry)


def test_copies_that_cannot_be_ordered_are_all_kept(two_gateways, tmp_path: Path) -> None:
    """Newer but behind (two writers diverged): neither copy holds all of the other's runs,
    so gc deletes neither, whichever replica its own list calls the group's, and says so."""
    a, b = two_gateways
    key = {"storageclass": "gp3", "profile": "etcd-fsync"}  # configured by write_config
    _push_copy(b, key, runs=7)
    time.sleep(1.1)  # a later push time, by the gateways' (one machine's) clock
    _push_copy(a, key, runs=5)
    for replicas in ([a.url, b.url], [b.url, a.url]):
        path = write_config(tmp_path / "config.yaml", a)
        document = json.loads(path.read_text())
        document["pushgateway"] = {"shards": replicas, "attempts": 1}
        path.write_text(json.dumps(document))
        result = fioprobe("gc", "--config", str(path))
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout == b""
        assert f"kept every copy of {key} on {a.url}, {b.url}" in result.stderr.decode() or (
            f"kept every copy of {key} on {b.url}, {a.url}" in result.stderr.decode()
        )
        assert (_runs_on(a, key), _runs_on(b, key)) == (5, 7)
    # Once the newer copy is also ahead, the older one goes.
    _push_copy(a, key, runs=8)
    result = fioprobe("gc", "--config", str(path))
    assert result.stdout.decode().splitlines() == [
        f"deleted {key} on {b.url} (old copy of a group that moved)"
    ]
    assert (_runs_on(a, key), _runs_on(b, key)) == (8, None)


def test_gc_takes_a_jobs_dir_as_run_does(pushgateway: services.Service, tmp_path: Path) -> None:
    """A configuration naming a profile of its own jobs directory: gc reads it as `run`."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    text = (REPO / "jobs" / "etcd-fsync.fio").read_text().replace("[etcd-fsync]", "[site-fsync]")
    (jobs / "site-fsync.fio").write_text(text)
    push_group(pushgateway, {"storageclass": "gp3", "profile": "site-fsync"})
    push_group(pushgateway, {"storageclass": "gp3", "profile": "gone"})
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({
        "owner": OWNER, "pushgateway": {"url": pushgateway.url, "attempts": 1},
        "targets": [{"name": "gp3", "directory": "/probe", "profiles": ["site-fsync"]}],
    }))  # fmt: skip
    result = fioprobe("gc", "--config", str(path), "--jobs-dir", str(jobs))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [
        "deleted {'storageclass': 'gp3', 'profile': 'gone'}"
    ]


def _copy(push_time: float, runs: int, push_id: int, basis: int = 0) -> dict[str, object]:
    """One group as /api/v1/metrics lists it, reduced to what orders two copies."""
    value = {"fioprobe_runs_total": runs, "fioprobe_push_id": push_id,
             "fioprobe_push_basis_id": basis, "push_time_seconds": push_time}  # fmt: skip
    return {name: {"metrics": [{"value": str(v)}]} for name, v in value.items()}


def test_which_copy_is_old_follows_the_push_link_before_the_clocks() -> None:
    """Replicas' clocks may disagree: a copy that continued from another's push is the newer
    one whatever its push time says; a contradiction (a cycle) deletes nothing."""
    from fioprobe.probe.gc import Copy, _old_and_live

    a, b, c = (Transport(f"http://127.0.0.1:{port}") for port in (1, 2, 3))
    first = Copy.of(_copy(push_time=200.0, runs=2, push_id=11))
    continued = Copy.of(_copy(push_time=100.0, runs=3, push_id=12, basis=11))  # clock behind
    assert continued.superseded_by(first) is False and first.superseded_by(continued) is True
    assert _old_and_live([(a, first), (b, continued)]) == ([a], [b])
    # Each continued from the other (a contradiction): nothing is live, nothing is deleted.
    tied = Copy.of(_copy(push_time=100.0, runs=2, push_id=13, basis=11))
    looped = Copy.of(_copy(push_time=300.0, runs=2, push_id=11, basis=13))
    assert _old_and_live([(a, tied), (b, looped)]) == ([], [])
    # Three copies whose clocks and links form a cycle: none is live, none is deleted.
    x = Copy.of(_copy(push_time=100.0, runs=1, push_id=21, basis=23))
    y = Copy.of(_copy(push_time=200.0, runs=1, push_id=22))
    z = Copy.of(_copy(push_time=300.0, runs=1, push_id=23))
    assert x.superseded_by(y) and y.superseded_by(z) and z.superseded_by(x)
    assert _old_and_live([(a, x), (b, y), (c, z)]) == ([], [])
    # A count that cannot be read orders nothing.
    broken = _copy(push_time=50.0, runs=1, push_id=31)
    broken["fioprobe_runs_total"] = {"metrics": [{"value": "NaN"}]}
    assert _old_and_live([(a, Copy.of(broken)), (b, continued)]) == ([], [a, b])
