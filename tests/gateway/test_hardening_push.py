"""What a Pushgateway replica, or what it answers, cannot do to a probe.

- A replica that is not the group's own and cannot be read (down, or listed but gone) never
  stops the outcome being pushed to the group's own replica.
- A string read back from a gateway (the `writer` label) reaches a log line only printable:
  no line break, no terminal escape.
- Counts stay below 2**53, the one limit of exact counting: a state file at or above it is
  refused, and a run that would take a total there is refused before anything is saved.

Real Pushgateways (services.pushgateway) and a closed port of 127.0.0.1 as the replica that
is down; real `fioprobe` processes where the exit status and the log are the point.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, fioprobe, gateway_group, gauge
from fioprobe.errors import FailureReason
from fioprobe.fio.parse import parse_file
from fioprobe.gateway import shards
from fioprobe.gateway.shards import Shards
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import JOB
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.metrics.totals import COUNT_LIMIT, GroupTotals, HistogramTotals
from fioprobe.publish import state
from fioprobe.publish.outcome import StateNotKept, publish
from fioprobe.publish.state import GroupState
from fioprobe.publish.statefile import StateDir, StateFile
from fioprobe.text import printable
from support import services

SAMPLE = (
    REPO
    / "tests"
    / "data"
    / "fio-corpus"
    / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
)


def _outcome(success: bool = True) -> ProbeOutcome:
    outcome = ProbeOutcome(parse_file(SAMPLE), success=True, duration_seconds=1.0)
    return outcome if success else outcome.failed(FailureReason.FIO_ERROR)


def _file(tmp_path: Path, name: str, key: dict[str, str]) -> StateFile:
    return StateDir(tmp_path / name, create_parents=True).group_file(key)


def _own_first(urls: list[str], prefix: str) -> str:
    """A name whose group lives on urls[0] (rendezvous hashing: about every other name)."""
    for index in range(64):
        name = f"{prefix}{index}"
        if shards.pick(urls, {"storageclass": name, "profile": "etcd-fsync", "node": "n1"}) == 0:
            return name
    raise AssertionError("no name of 64 hashes to the first replica")


def _groups(gateway: services.Service) -> list[dict[str, object]]:
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=30) as answer:
        return json.load(answer)["data"]


# --- a down replica that is not the group's own ----------------------------------------------


def test_a_down_foreign_replica_does_not_stop_a_new_probes_push(
    pushgateway: services.Service, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    down_port = services.free_port()  # nothing listens: connection refused at once
    down_url = f"http://{services.LOCALHOST}:{down_port}"
    urls = [pushgateway.url, down_url]
    name = _own_first(urls, "sc")
    key = {"storageclass": name, "profile": "etcd-fsync", "node": "n1"}
    replicas = Shards(
        tuple(Transport(url, timeout_seconds=services.REQUEST_S, attempts=1) for url in urls)
    )
    assert replicas.for_key(key).url == pushgateway.url

    # A new probe whose run failed: its failure is what must reach the gateway.
    file = _file(tmp_path, "state", key)
    publish(_outcome(success=False), key, replicas, file)
    group = gateway_group(pushgateway, **key)
    assert group is not None
    assert gauge(group, "fioprobe_success") == 0
    assert gauge(group, "fioprobe_runs_total") == 1
    log = capsys.readouterr().err
    assert f"replica {down_url} is not the group's own and could not be read" in log
    assert log.count("\n") == 1  # one line, once, although the group was looked at twice
    # The old replica was not asked to delete: the state names no replica yet.
    loaded = state.load(file)
    assert loaded is not None and loaded.shard is None

    # Another new probe of the group (a container without a volume) counts on from it.
    publish(_outcome(), key, replicas, _file(tmp_path, "fresh", key))
    group = gateway_group(pushgateway, **key)
    assert group is not None
    assert (gauge(group, "fioprobe_success"), gauge(group, "fioprobe_runs_total")) == (1, 2)

    # The replica answers again, holding an old copy of the group: the next run deletes it.
    revived = services.pushgateway(tmp_path / "revived", port=down_port).start()
    try:
        publish(_outcome(), key, Shards((Transport(down_url),)), _file(tmp_path, "old", key))
        assert any(g["labels"] == {"job": JOB, **key} for g in _groups(revived))
        publish(_outcome(), key, replicas, file)
        assert not any(g["labels"] == {"job": JOB, **key} for g in _groups(revived))
        group = gateway_group(pushgateway, **key)
        assert group is not None and gauge(group, "fioprobe_runs_total") == 3
        loaded = state.load(file)
        assert loaded is not None and loaded.shard == pushgateway.url
    finally:
        revived.stop()


def test_run_pushes_past_a_down_foreign_replica(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    """`fioprobe run` with the down replica listed: the probe's outcome is pushed to its own
    replica, the exit status is the probe's (0), and the log names the replica."""
    down_url = f"http://{services.LOCALHOST}:{services.free_port()}"
    name = _own_first([pushgateway.url, down_url], "disk-")
    disk = tmp_path / name
    disk.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        "pushgateway:\n"
        f"  shards: [{pushgateway.url}, {down_url}]\n"
        "targets:\n"
        f"  - {{name: {name}, directory: {disk}, node_local: true,\n"
        f"     state_dir: {tmp_path / 'state'},\n"
        "     profiles: [{name: etcd-fsync, size: 256k}]}\n"
    )
    result = fioprobe("run", "--config", str(config), "--node", "n1", timeout=300)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert f"replica {down_url} is not the group's own and could not be read" in err
    assert "Traceback" not in err
    group = gateway_group(pushgateway, storageclass=name, profile="etcd-fsync", node="n1")
    assert group is not None
    assert (gauge(group, "fioprobe_success"), gauge(group, "fioprobe_runs_total")) == (1, 1)


# --- strings read back from a gateway -------------------------------------------------------


FORGED = "abc\nfioprobe: forged ok\x1b[31m\x1b]0;title\x07"


def test_a_planted_writer_label_reaches_the_log_printable(
    pushgateway: services.Service, tmp_path: Path, state_dir: Path
) -> None:
    key = {"storageclass": "local", "profile": "etcd-fsync"}
    escaped = FORGED.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    body = f'# TYPE fioprobe_writer_info gauge\nfioprobe_writer_info{{writer="{escaped}"}} 1\n'
    request = urllib.request.Request(
        f"{pushgateway.url}/metrics/job/{JOB}/storageclass/local/profile/etcd-fsync",
        data=body.encode(),
        method="PUT",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status in (200, 202)
    (planted,) = (g for g in _groups(pushgateway) if g["labels"] == {"job": JOB, **key})
    writer_info = planted["fioprobe_writer_info"]["metrics"][0]  # type: ignore[index]
    assert writer_info["labels"]["writer"] == FORGED  # the gateway keeps it as it came

    result = fioprobe("push", str(SAMPLE), "--gateway", pushgateway.url, "--storageclass",
                      "local", "--profile", "etcd-fsync", "--quiet")  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode == 1, err  # writer_conflict: the planted writer "owns" the group
    assert "owned by another writer (abc fioprobe: forged ok\\x1b[31m\\x1b]0;title\\x07)" in err
    assert "\x1b" not in err and "\x07" not in err
    assert all(line.startswith("fioprobe: ") for line in err.splitlines()), err
    assert "\nfioprobe: forged" not in err


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("plain text", 200, "plain text"),
        ("two\r\nlines\t and  tabs", 200, "two lines and tabs"),
        ("\x1b[31mred\x1b[0m", 200, "\\x1b[31mred\\x1b[0m"),
        ("nul\x00 del\x7f bidi\u202e zwsp\u200b", 200, "nul\\x00 del\\x7f bidi\\u202e zwsp\\u200b"),
        ("line\u2028separator", 200, "line separator"),
        ("x" * 50, 10, "xxxxxxx..."),
        ("\x1b" * 10_000_000, 20, "\\x1b\\x1b\\x1b\\x1b\\..."),
    ],
)
def test_printable(text: str, limit: int, shown: str) -> None:
    assert printable(text, limit) == shown
    assert len(printable(text, limit)) <= limit


# --- the one limit of exact counting --------------------------------------------------------


KEY = {"storageclass": "local", "profile": "etcd-fsync"}


def _owned_state(totals: GroupTotals) -> GroupState:
    """A state that owns its group and pushed a moment ago: the next run pushes without
    reading the group back."""
    import time

    return GroupState(totals=totals, claimed=True, last_push_at=time.time(), push_id=7)


def _sync_histogram(count: int) -> HistogramTotals:
    histogram = HistogramTotals()
    histogram.counts[3] = count
    return histogram


@pytest.mark.parametrize(
    "totals",
    [
        GroupTotals(runs_total=COUNT_LIMIT),
        GroupTotals(runs_total=5, written_bytes_total=2**62),
        GroupTotals(runs_total=5, histograms={"write": _sync_histogram(COUNT_LIMIT)}),
    ],
    ids=["runs", "bytes", "histogram"],
)
def test_a_state_at_the_count_limit_is_refused(
    pushgateway: services.Service, tmp_path: Path, totals: GroupTotals
) -> None:
    file = _file(tmp_path, "state", KEY)
    file.write(_owned_state(totals).to_json())  # as a file written by hand, or long ago
    saved = file.path.read_bytes()
    with pytest.raises(StateNotKept) as refused:
        publish(_outcome(), KEY, Transport(pushgateway.url), file)
    message = str(refused.value)
    assert refused.value.reason == FailureReason.STATE_ERROR and refused.value.pushed
    assert "at or above 2**53, the limit of exact counting" in message
    assert "delete the group from the Pushgateway and remove this state file" in message
    assert str(file.path) in message
    assert file.path.read_bytes() == saved
    group = gateway_group(pushgateway, **KEY)  # the failure alone, no counters
    assert group is not None and gauge(group, "fioprobe_success") == 0
    assert "fioprobe_runs_total" not in group


@pytest.mark.parametrize(
    ("totals", "what"),
    [
        (GroupTotals(runs_total=COUNT_LIMIT - 1), f"runs_total is {COUNT_LIMIT}"),
        (
            GroupTotals(runs_total=5, histograms={"write": _sync_histogram(COUNT_LIMIT - 1)}),
            "the write histogram counts",
        ),
    ],
    ids=["runs", "histogram"],
)
def test_a_run_that_would_reach_the_count_limit_is_refused(
    pushgateway: services.Service, tmp_path: Path, totals: GroupTotals, what: str
) -> None:
    file = _file(tmp_path, "state", KEY)
    state.save(file, _owned_state(totals))  # just below the limit: still a good state
    saved = file.path.read_bytes()
    with pytest.raises(StateNotKept) as refused:
        publish(_outcome(), KEY, Transport(pushgateway.url), file)
    message = str(refused.value)
    assert refused.value.reason == FailureReason.STATE_ERROR and refused.value.pushed
    assert "this run would take the group's totals to or beyond 2**53" in message
    assert what in message
    assert file.path.read_bytes() == saved  # nothing saved that a later run would refuse
    loaded = state.load(file)  # and what is there still loads
    assert loaded is not None and loaded.totals == totals
    group = gateway_group(pushgateway, **KEY)
    assert group is not None and gauge(group, "fioprobe_success") == 0
    assert "fioprobe_runs_total" not in group


def test_push_refuses_a_state_at_the_limit_in_one_line(
    pushgateway: services.Service, tmp_path: Path
) -> None:
    file = _file(tmp_path, "state", KEY)
    file.write(_owned_state(GroupTotals(runs_total=COUNT_LIMIT)).to_json())
    result = fioprobe("push", str(SAMPLE), "--gateway", pushgateway.url, "--storageclass",
                      "local", "--profile", "etcd-fsync", "--state", str(file.path))  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode != 0
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "limit of exact counting" in err
