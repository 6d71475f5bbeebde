"""Sharded Pushgateways: each group on the replica fioprobe.gateway.shards picks, and N -> N+1.

Real Pushgateways (services.pushgateway), real state files, `fioprobe.publish.outcome` and
`fioprobe.probe.gc` as `fioprobe run` and `fioprobe gc` use them. After every step the test reads
every replica and checks that each group is on exactly one replica, its own, with exactly the
runs pushed so far: counters never go backwards and never count a run twice.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, fioprobe
from fioprobe.fio.parse import parse_file
from fioprobe.gateway import shards
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import JOB
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.probe import gc
from fioprobe.probe.schedule import spread_offset
from fioprobe.publish import state
from fioprobe.publish.outcome import publish
from fioprobe.publish.statefile import StateDir, StateFile
from fioprobe.target.config import Config, load_config
from support import services

SAMPLE = (
    REPO
    / "tests"
    / "data"
    / "fio-corpus"
    / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
)
NODES = [f"node-{n}" for n in range(10)]
TARGETS = ("gp2", "gp3", "io2")
PROFILES = ("etcd-fsync", "randread-iops")
OWNER = "per-node"


def _keys() -> list[dict[str, str]]:
    return [
        {"storageclass": sc, "profile": p, "node": node}
        for node in NODES
        for sc in TARGETS
        for p in PROFILES
    ]


# --- the hashing alone ---------------------------------------------------------------------


def test_rendezvous_moves_only_to_the_new_replica() -> None:
    urls = [f"http://pgw-{i}.pgw.fioprobe.svc:9091" for i in range(4)]
    keys = [
        {"storageclass": f"sc{s}", "profile": p, "node": f"n{n}"}
        for s in range(3)
        for p in PROFILES
        for n in range(200)
    ]
    before = [urls[shards.pick(urls[:3], k)] for k in keys]
    after = [urls[shards.pick(urls, k)] for k in keys]
    moved = [a for b, a in zip(before, after, strict=True) if a != b]
    assert set(moved) == {urls[3]}  # nothing moves between the old replicas
    assert 0.15 < len(moved) / len(keys) < 0.35  # about 1/4
    for url in urls[:3]:  # the old replicas stay balanced
        assert 0.15 < before.count(url) / len(keys) < 0.5
    # Deterministic, scheme-blind, and a conflict group lives beside its probe's group.
    key = keys[0]
    assert shards.pick(urls, key) == shards.pick([u.replace("http", "https") for u in urls], key)
    assert shards.pick(urls, {**key, "writer": "abc"}) == shards.pick(urls, key)


# --- real Pushgateways ---------------------------------------------------------------------


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[services.Service]]:
    started: list[services.Service] = []
    try:
        for index in range(4):
            # Replica 0 keeps its groups across a restart (as a replica's volume does).
            persistence = tmp_path / "pgw-0.db" if index == 0 else None
            gateway = services.pushgateway(tmp_path / f"pgw-{index}", persistence=persistence)
            started.append(gateway.start())
        yield started
    finally:
        for gateway in started:
            gateway.stop()


def _holdings(gateways: list[services.Service]) -> dict[tuple[str, ...], dict[str, float]]:
    """{(storageclass, profile, node): {replica url: runs}} over every replica."""
    held: dict[tuple[str, ...], dict[str, float]] = {}
    for gateway in gateways:
        if gateway.process is None or gateway.process.poll() is not None:
            continue
        with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=30) as answer:
            for group in json.load(answer)["data"]:
                labels = group["labels"]
                if labels.get("job") != JOB or "writer" in labels:
                    continue
                ident = (labels["storageclass"], labels["profile"], labels["node"])
                runs = float(group["fioprobe_runs_total"]["metrics"][0]["value"])
                held.setdefault(ident, {})[gateway.url] = runs
    return held


def _ident(key: dict[str, str]) -> tuple[str, ...]:
    return (key["storageclass"], key["profile"], key["node"])


def _check(
    gateways: list[services.Service], replicas: Shards, runs: dict[tuple[str, ...], int]
) -> None:
    held = _holdings(gateways)
    assert set(held) == set(runs)
    for ident, wanted in runs.items():
        key = dict(zip(("storageclass", "profile", "node"), ident, strict=True))
        assert held[ident] == {replicas.for_key(key).url: wanted}, ident


def _shards(gateways: list[services.Service], count: int) -> Shards:
    # One attempt: a replica that is down answers at once, not after three.
    return Shards(
        tuple(
            Transport(g.url, timeout_seconds=services.REQUEST_S, attempts=1)
            for g in gateways[:count]
        )
    )


def test_resharding_three_to_four_replicas(
    gateways: list[services.Service], tmp_path: Path
) -> None:
    outcome = ProbeOutcome(parse_file(SAMPLE), success=True, duration_seconds=1.0, owner=OWNER)
    keys = _keys()
    files: dict[tuple[str, ...], StateFile] = {
        _ident(k): StateDir(tmp_path / "state" / k["node"], create_parents=True).group_file(k)
        for k in keys
    }
    runs = {_ident(k): 0 for k in keys}
    three, four = _shards(gateways, 3), _shards(gateways, 4)
    moving = [k for k in keys if three.for_key(k).url != four.for_key(k).url]
    assert moving and all(four.for_key(k).url == gateways[3].url for k in moving)
    # Some groups that move belong to probes without a volume: a new state at every run,
    # so after the reshard they read their group back from where it was.
    stateless = {_ident(k) for k in moving[:3]}

    def round_of(replicas: Shards) -> None:
        for key in keys:
            ident = _ident(key)
            if ident in stateless:  # a container without a volume: a new state every run
                directory = tmp_path / "fresh" / f"{ident}-{runs[ident]}"
                file = StateDir(directory, create_parents=True).group_file(key)
            else:
                file = files[ident]
            publish(outcome, key, replicas, file)
            runs[ident] += 1

    for _ in range(3):  # the second run claims the group, the third pushes without reading
        round_of(three)
    _check(gateways, three, runs)

    round_of(four)
    _check(gateways, four, runs)
    for key in moving:  # the state now names the new replica
        loaded = state.load(files[_ident(key)])
        if _ident(key) not in stateless:
            assert loaded is not None and loaded.shard == gateways[3].url

    # Back to three replicas' placement is not the point; a failed delete is. Move two more
    # groups by hand-placing them on replica 0, then make replica 0 unreachable.
    strays = [
        k for k in keys if four.for_key(k) is not four.transports[0] and _ident(k) not in stateless
    ][:2]
    for key in strays:
        # The state says replica 0 held it (as if it was pushed there before a reshard).
        loaded = state.load(files[_ident(key)])
        assert loaded is not None
        loaded.shard = gateways[0].url
        state.save(files[_ident(key)], loaded)
        publish(outcome, key, Shards((four.transports[0],)), _scratch(tmp_path, key))
    time.sleep(1.5)  # its persistence interval is 1 s
    gateways[0].stop()
    for key in strays:  # pushed to its replica; the old copy cannot be deleted yet
        publish(outcome, key, four, files[_ident(key)])
        runs[_ident(key)] += 1
        loaded = state.load(files[_ident(key)])
        assert loaded is not None and loaded.shard == gateways[0].url  # retried next run
    gateways[0].start()  # comes back with the old copies (its persistence file)
    held = _holdings(gateways)
    assert all(len(held[_ident(k)]) == 2 for k in strays)

    # The probe deletes its old copy at its next run; gc deletes the other one.
    publish(outcome, strays[0], four, files[_ident(strays[0])])
    runs[_ident(strays[0])] += 1
    config = _config(tmp_path, gateways)
    result = gc.collect(gc.transport_for([config]), [config])
    assert result.misplaced == [({**_key_of(strays[1])}, gateways[0].url)]
    assert result.deleted == []
    _check(gateways, four, runs)


def _scratch(tmp_path: Path, key: dict[str, str]) -> StateFile:
    """A throwaway state: its push only plants an old copy of the group on a replica."""
    directory = tmp_path / "scratch" / "-".join(key.values())
    return StateDir(directory, create_parents=True).group_file(key)


def _key_of(key: dict[str, str]) -> dict[str, str]:
    return {name: key[name] for name in ("storageclass", "profile", "node")}


def _config(tmp_path: Path, gateways: list[services.Service]) -> Config:
    lines = [f"owner: {OWNER}", "pushgateway:", "  shards:"]
    lines += [f"    - {g.url}" for g in gateways]
    lines += ["targets:"]
    for name in TARGETS:
        lines += [f"  - name: {name}", f"    directory: /probe/{name}", "    node_local: true",
                  f"    profiles: [{', '.join(PROFILES)}]"]  # fmt: skip
    path = tmp_path / "gc.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_config(path)


def test_run_every_pushes_each_group_to_its_replica(
    gateways: list[services.Service], tmp_path: Path
) -> None:
    """The per-node DaemonSet's entrypoint: `fioprobe run --every` with a sharded config."""
    disks = [tmp_path / name for name in ("disk-a", "disk-b")]
    for disk in disks:
        disk.mkdir()
    config = tmp_path / "config.yaml"
    lines = ["owner: per-node", "pushgateway:", "  shards:"]
    lines += [f"    - {g.url}" for g in gateways[:3]]
    lines += ["targets:"]
    for disk in disks:
        lines += [f"  - {{name: {disk.name}, directory: {disk}, node_local: true,",
                  f"     state_dir: {tmp_path / 'state' / disk.name},",
                  "     profiles: [{name: etcd-fsync, size: 256k}]}"]  # fmt: skip
    config.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    result = fioprobe(
        "run", "--config", str(config), "--node", "node-7", "--every", "2", "--cycles", "2",
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    assert time.monotonic() - started >= 2  # the second run waited for its slot
    replicas = _shards(gateways, 3)
    held = _holdings(gateways)
    for disk in disks:
        key = {"storageclass": disk.name, "profile": "etcd-fsync", "node": "node-7"}
        assert held[_ident(key)] == {replicas.for_key(key).url: 2}


def test_spread_offset_is_stable_and_spread() -> None:
    offsets = [spread_offset(f"node-{n}", 300) for n in range(1000)]
    assert offsets == [spread_offset(f"node-{n}", 300) for n in range(1000)]
    assert all(0 <= offset < 300 for offset in offsets)
    per_minute = [sum(1 for o in offsets if m * 60 <= o < (m + 1) * 60) for m in range(5)]
    assert min(per_minute) > 150, per_minute  # about 200 nodes start in each minute
