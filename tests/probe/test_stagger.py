"""The etcd members take turns: slots that never overlap, and `fioprobe run --every --member`.

The computation (`fioprobe.probe.stagger`) is checked as it is, for the member counts etcd
has (3, 5, 7) and the intervals the deployment offers; then the command runs end to end with
real fio and a real Pushgateway: two members on this machine, each in its own slot, and a
node that is no member, which does not run. Times are checked against the slots the code
must keep (a run starts in its slot), never against how fast this machine is.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge
from fioprobe.errors import Interrupted
from fioprobe.fio.profiles import load_profile
from fioprobe.probe import stagger
from fioprobe.probe.members import RECHECK_SECONDS, Membership
from fioprobe.probe.schedule import (
    known_before,
    pass_seconds,
    recorded_since,
    recorded_state_files,
    run_staggered,
    spread_offset,
    written_at,
)
from fioprobe.probe.slot import FIO_STOP_SECONDS
from fioprobe.publish.state import GroupState
from fioprobe.target.config import load_config
from support import services
from support.stagger_target import jobs_dir, write_config

# --- the slots -------------------------------------------------------------------------------

#: A time in 2025, so the intervals are epoch-aligned ones of today, not the first ones.
NOW = 1_750_000_123.4


@pytest.mark.parametrize("every", [60.0, 300.0])
@pytest.mark.parametrize("count", [3, 5, 7])
def test_every_member_has_one_slot_per_interval_and_none_overlap(every: float, count: int) -> None:
    names = [f"cp-{i}.example.com" for i in (4, 0, 6, 2, 5, 1, 3)[:count]]  # not sorted
    first = math.floor(NOW / every)
    for interval in (first, first + 1, first + 2):
        slots = stagger.all_slots(every, interval, names)
        assert sorted(slots) == sorted(names)
        ordered = sorted(slots.values(), key=lambda s: s.start)
        assert [s.index for s in ordered] == list(range(count))
        assert [ordered.index(slots[n]) for n in sorted(names)] == list(range(count))
        # Together the slots are the interval, back to back: disjoint, nothing left over.
        assert ordered[0].start == interval * every
        assert ordered[-1].end == (interval + 1) * every
        for left, right in itertools.pairwise(ordered):
            assert left.end == right.start
        for slot in ordered:
            assert slot.start < slot.deadline < slot.end
            assert slot.deadline == slot.end - stagger.GUARD_SECONDS
            # A run from its start to its deadline stays inside, the guard before the end.
            assert slot.interval_start <= slot.start and slot.end <= (interval + 1) * every
    # next_slot walks each member through consecutive intervals, one start in each.
    for name in names:
        starts = []
        now = NOW
        for _ in range(4):
            slot = stagger.next_slot(now, every, names, name)
            assert slot is not None and slot.start >= now
            starts.append(slot)
            now = slot.start + 0.001
        first_interval = starts[0].interval
        assert [s.interval for s in starts] == list(range(first_interval, first_interval + 4))
        assert all(s.start == stagger.slot_of(every, s.interval, names, name).start for s in starts)


def test_a_slot_that_has_started_is_not_joined() -> None:
    names = ["a", "b", "c"]
    slot_b = stagger.slot_of(60, 100, names, "b")
    assert slot_b is not None and (slot_b.start, slot_b.end) == (6020.0, 6040.0)
    assert stagger.next_slot(6020.0, 60, names, "b") == slot_b
    late = stagger.next_slot(6020.5, 60, names, "b")
    assert late is not None and (late.interval, late.start) == (101, 6080.0)
    assert stagger.next_slot(6000.0, 60, names, "z") is None
    # The list is a set: order and repeats do not change anyone's slot.
    assert stagger.slot_of(60, 100, ["c", "b", "a", "b"], "b") == slot_b


def test_a_run_needs_its_slot_from_a_read_before_its_interval() -> None:
    """Two members' runs in one interval each had a read before the interval began and one
    after (right before the run): one change of the members cannot be seen by one of them
    and missed by the other. A read from before the interval that gave another slot, or
    none at all (a pod started in the interval), does not count."""
    slot = stagger.slot_of(60, 100, ["a", "b"], "b")
    assert slot is not None
    start = slot.interval_start
    after = (start + 29.0, ("a", "b"))
    assert known_before([(start - 30.0, ("a", "b")), after], slot, "b", 2.0)
    # The plan's read came late (a slow push); the read before the previous run counts.
    assert known_before([(start - 30.0, ("a", "b")), (start + 1.0, ("a", "b")), after], slot,
                        "b", 2.0)  # fmt: skip
    assert not known_before([(start + 1.0, ("a", "b")), after], slot, "b", 2.0)
    assert not known_before([(start - 30.0, ("b",)), after], slot, "b", 2.0)
    assert not known_before([(start - 30.0, ("a", "b", "c")), after], slot, "b", 2.0)
    assert not known_before([(start - 30.0, None), after], slot, "b", 2.0)
    # Another list that gives b the same slot is the same slot: b's run cannot overlap.
    assert known_before([(start - 30.0, ("a2", "b")), after], slot, "b", 2.0)


def _config(tmp_path: Path, profile: str) -> Path:
    return write_config(tmp_path, "http://127.0.0.1:9", "cp", profile)


REFUSED_60S_3 = (
    "this node's pass (profile etcd-fsync 20s budgeted, 1s each to start, 15s to stop fio, 2s "
    "to read the members first) needs 38s, but 3 members share every 60s: a slot is 20.0s, "
    "18.0s after the 2s guard; give --every 120 or more, or fewer profiles"
)


def test_etcd_fsync_fits_300s_for_up_to_7_members_not_60s_for_3(tmp_path: Path) -> None:
    """etcd-fsync is budgeted at 20 s; with a second to start, fio's 15 s to stop after
    its timeout and 2 s to read the members first, a pass needs 38 s. Every 300 s, 7
    members get 42.9 s slots (40.9 s before the guard): it fits; 8 would not. Every 60 s,
    3 members get 20 s slots: it is refused, and the line says the shortest interval that
    fits (3 x (38 + 2) = 120 s)."""
    assert load_profile("etcd-fsync").budget_seconds == 20
    config = load_config(_config(tmp_path, "etcd-fsync"))
    needed, what = pass_seconds(config, None)
    assert needed == 20 + 1 + FIO_STOP_SECONDS + RECHECK_SECONDS == 38
    for count in range(1, 8):
        assert stagger.fit_problem(needed, 300, count, what) is None, count
    assert stagger.fit_problem(needed, 300, 8, what) is not None  # 37.5 - 2 < 38
    assert stagger.fit_problem(needed, 60, 3, what) == REFUSED_60S_3
    assert stagger.fit_problem(needed, 120, 3, what) is None
    assert stagger.fit_problem(needed, 119, 3, what) is not None


def test_a_slot_too_short_is_refused_before_anything_runs(tmp_path: Path) -> None:
    config = _config(tmp_path, "etcd-fsync")
    result = fioprobe("run", "--config", str(config), "--node", "b", "--every", "60",
                      "--member", "a", "--member", "b", "--member", "c", timeout=60)  # fmt: skip
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode().splitlines() == [f"fioprobe: error: run: {REFUSED_60S_3}"]


def _overlaps(starts: list[float], every: float, run: float) -> bool:
    """Whether runs of `run` seconds starting at `starts` (each interval) ever overlap."""
    ordered = sorted(s % every for s in starts)
    gaps = [(ordered[(i + 1) % len(ordered)] - ordered[i]) % every for i in range(len(ordered))]
    return min(gaps) < run


def test_the_hash_offsets_overlapped_the_slots_never_do() -> None:
    """The offset schedule put cp-1 and cp-2's 15 s runs 2.3 s apart (both about 15 s into
    every 300 s), and 28 % of three-member clusters have two runs at once; slots have none."""
    names = ["cp-1", "cp-2", "cp-3"]
    offsets = [spread_offset(n, 300) for n in names]
    assert _overlaps(offsets, 300, 15)
    assert abs(offsets[0] - offsets[1]) > 100 and abs(offsets[1] - offsets[2]) < 15
    clusters = [[f"cluster{i}-cp-{j}" for j in range(3)] for i in range(1000)]
    share = sum(_overlaps([spread_offset(n, 300) for n in c], 300, 15) for c in clusters) / 1000
    assert 0.22 < share < 0.34, share  # 1 - (1 - 3 x 15/300)^2 = 27.8 %
    for members in [names, *clusters[:200]]:
        slots = stagger.all_slots(300, 5_833_333, members)
        runs = sorted((s.start, s.deadline) for s in slots.values())
        for (_, end), (start, _) in itertools.pairwise(runs):
            assert end + stagger.GUARD_SECONDS <= start


# --- what a restart finds ---------------------------------------------------------------------


def test_a_run_recorded_in_the_interval_is_found_a_forged_one_is_not(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "http://127.0.0.1:9", "a"), jobs_dir(tmp_path))
    (file,) = recorded_state_files(config, "a")
    assert file.path == tmp_path / "state" / "a" / file.name
    assert written_at(file) is None  # nothing ran yet
    assert recorded_since([file], 0.0, None) is None
    file.write(GroupState().to_json())
    os.utime(file.path, (1_000_000.0, 1_000_000.0))
    assert written_at(file) == 1_000_000.0
    assert recorded_since([file], 999_990.0, None) == (file.path, 1_000_000.0)
    assert recorded_since([file], 1_000_001.0, None) is None  # before this interval
    assert recorded_since([file], 999_990.0, 1_000_000.0) is None  # this process's own run
    file.path.chmod(0o666)  # writable by anyone: not the probe's, it records nothing
    assert written_at(file) is None
    file.path.unlink()
    file.path.symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text("{}")
    assert written_at(file) is None


# --- end to end --------------------------------------------------------------------------------


def _run_window(gateway: services.Service, node: str) -> tuple[float, float]:
    """(start, end) of the node's pushed run. fioprobe_duration_seconds runs from the run's
    start to its push, which the Pushgateway stamps (push_time_seconds): their difference is
    the start (a moment later, by the push's own latency). The end is when the outcome was
    taken, before the push (fioprobe_last_success_timestamp_seconds)."""
    group = gateway_group(gateway, storageclass="etcd", profile="slot-fsync", node=node)
    assert group is not None, node
    assert gauge(group, "fioprobe_success") == 1
    assert gauge(group, "fioprobe_runs_total") == 1
    start = gauge(group, "push_time_seconds") - gauge(group, "fioprobe_duration_seconds")
    return start, gauge(group, "fioprobe_last_success_timestamp_seconds")


@pytest.mark.slow
def test_two_members_run_each_in_its_slot_and_push(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    """`fioprobe run --every 60 --member a --member b --cycles 2` on two "nodes" started
    together in the first half of an interval: a's slot of that interval has begun, b's is
    ahead, but b read the members only within that interval, so it waits too. Each runs
    once, in its own half of the next interval, and the two runs do not overlap."""
    every = 60
    if not 2 <= time.time() % every < 20:  # start in the first third of an interval
        time.sleep(every - time.time() % every + 2)
    interval = math.floor(time.time() / every)
    jobs = jobs_dir(tmp_path)
    started = {}
    for node in ("a", "b"):
        command = [
            sys.executable, "-m", "fioprobe", "run",
            "--config", str(write_config(tmp_path, pushgateway.url, node)),
            "--jobs-dir", str(jobs), "--node", node, "--every", str(every),
            "--member", "a", "--member", "b", "--cycles", "2" if node == "b" else "1",
        ]  # fmt: skip
        started[node] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outputs = {node: process.communicate(timeout=300) for node, process in started.items()}
    said = {node: output[1].decode() for node, output in outputs.items()}
    for node, process in started.items():
        assert process.returncode == 0, said[node]
    windows = {node: _run_window(pushgateway, node) for node in started}
    for node, (start, _) in windows.items():
        slot = stagger.slot_of(every, interval + 1, ["a", "b"], node)
        assert slot is not None and slot.start <= start < slot.end, (node, start, slot)
        assert f"node {node} is etcd member {slot.index + 1} of 2 (a, b)" in said[node]
    assert (
        "this node had not read the members before the interval of its slot began: it runs "
        "from the next interval on (slot 2 of 2, 30-60s of every 60s)"
    ) in said["b"], said["b"]
    (a_start, a_end), (b_start, b_end) = windows["a"], windows["b"]
    assert a_end <= b_start or b_end <= a_start, windows


def test_a_node_that_is_no_member_does_not_run(
    tmp_path: Path, pushgateway: services.Service
) -> None:
    config = write_config(tmp_path, pushgateway.url, "c")
    result = fioprobe("run", "--config", str(config), "--jobs-dir", str(jobs_dir(tmp_path)),
                      "--node", "c", "--every", "60", "--member", "a", "--member", "b",
                      "--cycles", "1", timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr.decode().splitlines() == [
        "fioprobe: node c is not one of the 2 etcd members (a, b): it does not run while it is not"
    ]
    assert gateway_group(pushgateway, storageclass="etcd", profile="slot-fsync", node="c") is None
    assert not (tmp_path / "state" / "c").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--member", "a"], "run: --member takes turns in every interval: give --every SECONDS"),
        (
            ["--every", "60", "--member", "a", "--members-label", "x"],
            "run: argument --members-label: not allowed with argument --member",
        ),
        (
            ["--every", "60", "--member", "A_b"],
            "run: --member 'A_b' must be a node name: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters",
        ),
        (
            ["--every", "60", "--members-label", "a,b"],
            "run: --members-label 'a,b' must be a label key ([prefix/]name): the name at most "
            "63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
    ],
)
def test_member_options_refused(tmp_path: Path, args: list[str], said: str) -> None:
    result = fioprobe("run", "--config", str(_config(tmp_path, "etcd-fsync")), *args, timeout=60)
    assert result.returncode == 2
    assert said in result.stderr.decode(), result.stderr.decode()


def test_members_by_label_need_a_pod(tmp_path: Path) -> None:
    outside = {"KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""}
    result = fioprobe("run", "--config", str(_config(tmp_path, "etcd-fsync")), "--every", "60",
                      "--members-label", "node-role.kubernetes.io/control-plane", "--node", "a",
                      timeout=60, env=outside)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [
        "fioprobe: error: run: --members-label reads the Kubernetes API: "
        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set: not running in a "
        "Kubernetes pod, so the API server cannot be found"
    ]


def test_the_members_need_this_nodes_name(tmp_path: Path) -> None:
    result = fioprobe("run", "--config", str(_config(tmp_path, "etcd-fsync")), "--every", "60",
                      "--member", "a", "--node", "", timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert "give --node NODE or set NODE_NAME" in result.stderr.decode()


# --- a stop signal between runs ----------------------------------------------------------------


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _own_pid_namespace() -> bool:
    """Whether this process may give a child a PID namespace of its own (root with
    CAP_SYS_ADMIN, util-linux's unshare)."""
    try:
        probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True,
                               timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


#: The loop's interval in the test below: a day, so that a node whose run is at least a few
#: hours away can always be picked.
DAY = 86_400.0


def _far_from_a_run(mode: str) -> tuple[str, list[str]]:
    """A node name and member options whose next run is at least three hours away: with two
    members, "a" runs at the start of each day (UTC) and "b" at its middle; a per-node loop
    at its node name's offset (spread_offset)."""
    now = time.time()
    if mode == "etcd-members":
        starts = {"a": 0.0, "b": DAY / 2}
        members = ["--member", "a", "--member", "b"]
    else:
        starts = {name: spread_offset(name, DAY) for name in ("a", "b", "c", "d")}
        members = []
    for name, offset in starts.items():
        if (offset - now) % DAY >= 3 * 3600:
            return name, members
    raise AssertionError(f"no node far from its run in {starts}")


@pytest.mark.skipif(not _own_pid_namespace(), reason="needs a PID namespace of its own (root)")
@pytest.mark.parametrize("mode", ["etcd-members", "per-node"])
def test_a_loop_that_is_pid_1_stops_at_once_between_runs(tmp_path: Path, mode: str) -> None:
    """A DaemonSet's container runs the loop as PID 1 of its PID namespace, and the kernel
    drops every signal PID 1 has no handler for. Run as PID 1 the same way (unshare), the
    loop sleeping until a run hours away stops within seconds of SIGTERM, 128 + 15, saying
    that no probe was running, and leaves no file in its probe or state directory."""
    node, members = _far_from_a_run(mode)
    config = write_config(tmp_path, f"http://127.0.0.1:{services.free_port()}", node)
    log = tmp_path / "stderr"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-m", "fioprobe",
             "run", "--config", str(config), "--jobs-dir", str(jobs_dir(tmp_path)), "--node",
             node, "--every", str(int(DAY)), *members],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        # The loop is asleep once it said when it runs next.
        deadline = time.monotonic() + 60
        while "next run in" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "next run in" in log.read_text(), log.read_text()
        loop = _children(proc.pid)
        assert len(loop) == 1, loop
        os.kill(loop[0], 15)
        # Without a handler the signal is dropped and this wait runs out.
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    said = log.read_text()
    assert proc.returncode == 128 + 15, said
    assert "fioprobe: error: interrupted by SIGTERM; no probe was running" in said, said
    assert "Traceback" not in said
    assert not list((tmp_path / f"disk-{node}").iterdir())
    state = tmp_path / "state" / node
    assert not state.exists() or not list(state.iterdir())


class _SignalledRead:
    """Members whose read gets SIGTERM half way through writing its copy of the list."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self.reads = 0

    @property
    def fixed(self) -> bool:
        return False

    def read(self, *, quick: bool = False) -> Membership:
        self.reads += 1
        with self.copy.open("w") as f:
            f.write("a\n")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the signal is delivered here, in the middle of the write
            f.write("b\n")
        return Membership(("a", "b"))


def test_a_signal_during_the_members_read_ends_the_loop_after_the_read(tmp_path: Path) -> None:
    """The members' read may rewrite the node's copy of the list: a stop signal then is held
    to the read's end, which ends the loop before anything else (no run, no sleep)."""
    members = _SignalledRead(tmp_path / "members")
    jobs = jobs_dir(tmp_path)
    config = load_config(write_config(tmp_path, "http://127.0.0.1:9", "a"), jobs)
    with pytest.raises(Interrupted) as stopped:
        run_staggered(config, 60.0, members, node="a", jobs_dir=jobs, quiet=True)
    assert stopped.value.signum == signal.SIGTERM
    assert stopped.value.what_happened == "no probe was running"
    assert members.reads == 1
    assert (tmp_path / "members").read_text() == "a\nb\n"
    # The loop's handler is gone with the loop.
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
