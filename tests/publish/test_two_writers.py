"""Two writers of one group: a hand-run `fioprobe push` beside the CronJob's, or a pod
rescheduled with a fresh volume while the old one still pushes.

Each writer has its own state file; both push the same group to a real Pushgateway, 100 runs
in a seeded mix of orders: one after the other, the same one many times, and both at once.
What must hold after every run:
- the group's counters never go backwards (runs, failures, histogram count and buckets);
- a run either counts (exit 0) or is refused (exit 1, `writer_conflict`), and a refusal is
  itself pushed into a group of its own (`writer` label) with `fioprobe_success 0`, where
  FioProbeFailing sees it;
- the counters equal the runs that counted, exactly: none lost, none counted twice.
When the owner stops for longer than the writer lease, the other writer takes the group
over and brings its refused runs along: in the end all runs are counted exactly once.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import CORPUS
from fioprobe.publish.outcome import ENV_SETTLE
from support import services

SAMPLE = CORPUS / "fio343-client-1client-psync-randread.json"
SAMPLES_PER_RUN = json.loads(SAMPLE.read_text())["client_stats"][0]["read"]["clat_ns"]["N"]
RUNS = 100
KEY = {"job": "fioprobe", "storageclass": "shared", "profile": "randread-iops"}


def push(gateway: str, state: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "fioprobe", "push", str(SAMPLE), "--gateway", gateway,
         "--storageclass", KEY["storageclass"], "--profile", KEY["profile"],
         "--state", str(state), "--attempts", "1", "--quiet", *extra],
        capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def all_groups(gateway: str) -> list[dict]:
    with urllib.request.urlopen(gateway + "/api/v1/metrics", timeout=5) as answer:
        return json.load(answer)["data"]


def counters(gateway: str) -> tuple[float, float, float, list[float]]:
    """(runs, failures, histogram count, cumulative buckets) of the shared group."""
    (group,) = [g for g in all_groups(gateway) if g["labels"] == KEY]
    runs = float(group["fioprobe_runs_total"]["metrics"][0]["value"])
    failures = float(group["fioprobe_failures_total"]["metrics"][0]["value"])
    (histogram,) = group["fioprobe_read_latency_seconds"]["metrics"]
    buckets = [float(n) for _, n in sorted(histogram["buckets"].items(), key=lambda b: float(b[0]))]
    return runs, failures, float(histogram["count"]), buckets


def refusal_groups(gateway: str) -> dict[str, dict]:
    """writer -> the group a refused run pushed."""
    return {
        g["labels"]["writer"]: g
        for g in all_groups(gateway)
        if "writer" in g["labels"] and g["labels"]["storageclass"] == KEY["storageclass"]
    }


def pending_runs(state: Path) -> int:
    data = json.loads(state.read_text())
    return int((data.get("pending") or {}).get("runs_total", 0))


def push_together(url: str, states: list[Path]) -> list[subprocess.CompletedProcess[bytes]]:
    """Start one push per state at the same moment; all their results."""
    results: list[subprocess.CompletedProcess[bytes]] = []
    start = threading.Barrier(len(states))

    def one(state: Path) -> None:
        start.wait(30)
        results.append(push(url, state))

    threads = [threading.Thread(target=one, args=(state,)) for state in states]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert len(results) == len(states)
    return results


def test_two_writers_never_go_backwards_and_count_every_run_once(tmp_path: Path) -> None:
    gateway = services.pushgateway(tmp_path / "pushgateway").start()
    try:
        _exercise(gateway.url, tmp_path)
    finally:
        gateway.stop()


def _exercise(url: str, tmp_path: Path) -> None:
    states = {"a": tmp_path / "a" / "state.json", "b": tmp_path / "b" / "state.json"}
    rng = random.Random(20261122)
    counted = refused = runs = 0
    last = (0.0, 0.0, 0.0, [])

    def check(results: list[subprocess.CompletedProcess[bytes]]) -> None:
        nonlocal counted, refused, last
        for result in results:
            stderr = result.stderr.decode()
            assert "Traceback" not in stderr, stderr
            if result.returncode == 0:
                counted += 1
            else:
                assert result.returncode == 1, stderr
                assert "owned by another writer" in stderr and "(writer_conflict)" in stderr, stderr
                assert stderr.count("\n") == 1, stderr
                refused += 1
        now = counters(url)
        assert now[0] >= last[0] and now[1] >= last[1] and now[2] >= last[2], (last, now)
        if last[3] and len(last[3]) == len(now[3]):
            assert all(n >= o for n, o in zip(now[3], last[3], strict=True)), (last, now)
        assert now[0] == counted, f"gateway counts {now[0]} runs, {counted} exited 0"
        assert now[2] == counted * SAMPLES_PER_RUN
        last = now

    # The CronJob's writer runs first, twice: from then on it owns the group. (Before any
    # writer owns it, two brand-new writers race: see the next test.)
    for _ in range(2):
        runs += 1
        check([push(url, states["a"])])
    while runs < RUNS:
        pattern = rng.choice(["a", "b", "ab", "ba", "both", "aaa", "bbb"])
        if pattern == "both" and runs + 2 <= RUNS:
            results = push_together(url, list(states.values()))
            runs += 2
            check(results)
            continue
        for writer in pattern.replace("both", "ab"):
            if runs == RUNS:
                break
            runs += 1
            check([push(url, states[writer])])

    assert counted + refused == RUNS
    assert refused > 0, "the mix never made two writers meet: it tests nothing"
    # Every refusal is visible: one group per refused writer, success 0 with the reason.
    refusals = refusal_groups(url)
    assert refusals
    for group in refusals.values():
        assert group["fioprobe_success"]["metrics"][0]["value"] == "0"
        reason = group["fioprobe_failure_reason_info"]["metrics"][0]["labels"]["reason"]
        assert reason == "writer_conflict"
    # The refused runs are not lost: they wait in the refused writer's state.
    assert sum(pending_runs(state) for state in states.values()) == refused

    # The owner stops. After the lease, the other writer takes over with its refused runs.
    owner = "a" if pending_runs(states["b"]) else "b"
    other = "b" if owner == "a" else "a"
    time.sleep(1.5)
    takeover = push(url, states[other], "--writer-lease", "1")
    assert takeover.returncode == 0, takeover.stderr.decode()
    runs_now, _, count_now, _ = counters(url)
    assert runs_now == RUNS + 1, "after the takeover every run is counted exactly once"
    assert count_now == (RUNS + 1) * SAMPLES_PER_RUN
    assert pending_runs(states[other]) == 0
    assert owner not in refusal_groups(url)


RACES = 12


def test_brand_new_writers_racing_lose_no_run_and_count_none_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any writer owns the group, two brand-new writers start at the same moment, 12
    times on a fresh group: the Pushgateway has no compare-and-swap, so both read the group
    back and both push. Each writer looks again after saving and, after its push, checks that
    the group holds its push or one that continued from it. Whatever the interleaving: a run
    either counts (exit 0) or is refused loudly (exit 1, writer_conflict, kept as pending),
    so the gateway's runs plus the pending runs always equal the runs made; and once the
    writers go on one at a time, every run is in the gateway exactly once."""
    monkeypatch.delenv(ENV_SETTLE)  # the product's default settle time
    gateway = services.pushgateway(tmp_path / "pushgateway").start()
    try:
        outcomes: dict[int, int] = {}
        for race in range(RACES):
            _delete_all(gateway.url)
            states = [tmp_path / str(race) / name / "state.json" for name in "ab"]
            results = push_together(gateway.url, states)
            for result in results:
                stderr = result.stderr.decode()
                assert "Traceback" not in stderr, stderr
                assert result.returncode in (0, 1), stderr
                if result.returncode == 1:
                    assert "(writer_conflict)" in stderr and stderr.count("\n") == 1, stderr
                outcomes[result.returncode] = outcomes.get(result.returncode, 0) + 1
            runs, _, count, _ = counters(gateway.url)
            pending = sum(pending_runs(state) for state in states)
            assert runs + pending == 2, f"race {race}: {runs} counted + {pending} pending"
            assert runs == sum(r.returncode == 0 for r in results)
            assert count == runs * SAMPLES_PER_RUN
            # One at a time from here: the refused writer's run comes along once the group is
            # free (the other writer had not outlived a run, so it owns nothing yet).
            made = 2
            for state in states:
                before = counters(gateway.url)
                result = push(gateway.url, state)
                made += 1
                assert result.returncode in (0, 1), result.stderr.decode()
                after = counters(gateway.url)
                assert after[0] >= before[0] and after[2] >= before[2]
            runs, _, count, _ = counters(gateway.url)
            pending = sum(pending_runs(state) for state in states)
            assert runs + pending == made and count == runs * SAMPLES_PER_RUN
        print(f"exit statuses of the racing pushes: {outcomes}")
    finally:
        gateway.stop()


def _delete_all(gateway: str) -> None:
    """Every group of the shared StorageClass (the group and refusals) deleted."""
    for group in all_groups(gateway):
        labels = group["labels"]
        if labels.get("storageclass") != KEY["storageclass"]:
            continue
        path = "/metrics/job/fioprobe" + "".join(
            f"/{name}/{value}" for name, value in labels.items() if name != "job"
        )
        request = urllib.request.Request(gateway + path, method="DELETE")
        with urllib.request.urlopen(request, timeout=5):
            pass
