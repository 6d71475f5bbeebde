"""The fault matrix: `fioprobe run` with three targets, the middle one faulty.

For every fault a disk, a volume or the Pushgateway can have, one real `fioprobe run` (real
fio, a real Pushgateway, real mounts) is made with the fault on the middle target only. What
must hold each time:
- the faulty target's run ends in exactly one pushed outcome: `fioprobe_success 0` with the
  right reason (where the Pushgateway itself is the fault, nothing can be pushed: the run is
  kept and pushed exactly once by the next run);
- the first and the last target push normally in the same run;
- no traceback, the exit status documented for the fault, one line per target;
- the state is never corrupt (a run after the fault clears is counted on top of what was
  there), and the counters never go backwards;
- the run ends within its documented time bound (docs/FAULTS.md).
"""

from __future__ import annotations

import contextlib
import errno
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from support import hostile_http as hostile
from support import services
from support.fixtures import fuse_unavailable
from support.slowfs import slow_fs

FIRST, FAULTY, LAST = "first", "faulty", "last"
TARGETS = (FIRST, FAULTY, LAST)
PROFILE = "matrix-fsync"
#: A tiny fsync probe: 64 writes of 4 KiB, each followed by fdatasync.
PROFILE_TEXT = f"""# fioprobe-budget-bytes: 262144
# fioprobe-budget-seconds: 10
[{PROFILE}]
ioengine=sync
rw=write
bs=4k
fdatasync=1
size=256k
runtime=5
"""
#: The Pushgateway settings of every configuration here: a short deadline, two attempts.
PUSH_TIMEOUT_S, PUSH_ATTEMPTS, PUSH_BACKOFF_S = 2.0, 2, 0.5
#: Bound of one Pushgateway call (docs/FAULTS.md): attempts x deadline + the backoffs.
CALL_BOUND_S = PUSH_ATTEMPTS * PUSH_TIMEOUT_S + PUSH_BACKOFF_S * (2 ** (PUSH_ATTEMPTS - 1) - 1)
#: Per-target fio timeout set in the configuration (the tiny profile needs well under 1 s).
FIO_TIMEOUT_S = 30.0
#: A run's documented bound for three targets: fio's timeout plus, per target, the read-back,
#: the push and the failure POST (three Pushgateway calls at most); plus interpreter start.
RUN_BOUND_S = 3 * (FIO_TIMEOUT_S + 3 * CALL_BOUND_S) + 10


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                   check=True, timeout=30)  # fmt: skip


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, timeout=30, capture_output=True)


def fill(directory: Path) -> None:
    """Fill a filesystem to the last byte (ends with ENOSPC)."""
    with open(directory / "filler", "wb", buffering=0) as handle, contextlib.suppress(OSError):
        for _ in range(1_000_000):  # bounded: a 1 TiB filesystem would not fill either
            handle.write(b"x" * 4096)


# --- the real Pushgateway, read through its API --------------------------------------------


def groups(gateway: services.Service) -> dict[str, dict]:
    """storageclass -> the fioprobe group (without `writer` groups of refused runs)."""
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as answer:
        data = json.load(answer)["data"]
    return {
        g["labels"]["storageclass"]: g
        for g in data
        if g["labels"].get("job") == "fioprobe" and "writer" not in g["labels"]
    }


def value(group: dict, name: str, **labels: str) -> float | None:
    """A gauge or counter of a group (None when absent)."""
    family = group.get(name)
    if not family:
        return None
    for metric in family["metrics"]:
        if all(metric["labels"].get(k) == v for k, v in labels.items()):
            return float(metric["value"])
    return None


def reason(group: dict) -> str | None:
    family = group.get("fioprobe_failure_reason_info")
    return family["metrics"][0]["labels"]["reason"] if family else None


def histogram(group: dict) -> tuple[float, list[tuple[float, float]]]:
    """(count, [(le, cumulative count)]) of the sync latency histogram."""
    (metric,) = group["fioprobe_sync_latency_seconds"]["metrics"]
    buckets = sorted((float(le), float(n)) for le, n in metric["buckets"].items())
    return float(metric["count"]), buckets


def assert_histogram_consistent(group: dict) -> None:
    count, buckets = histogram(group)
    cumulative = [n for _, n in buckets]
    assert cumulative == sorted(cumulative), f"buckets decrease: {buckets}"
    assert all(n >= 0 for n in cumulative)
    assert cumulative[-1] <= count


# --- the three-target run --------------------------------------------------------------------


@dataclass
class Matrix:
    """Three targets' directories, their configuration and the gateway they push to."""

    tmp: Path
    gateway: services.Service
    jobs: Path
    directories: dict[str, Path]
    url: str
    faulty_target: dict = field(default_factory=dict)
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    rounds: list[subprocess.CompletedProcess[bytes]] = field(default_factory=list)

    @property
    def config(self) -> Path:
        return self.tmp / "fioprobe.yaml"

    def write_config(self) -> None:
        targets = []
        for name in TARGETS:
            # Dedicated volumes: each keeps its state in its .fioprobe-state, which the
            # faults here reach (a full, read-only or failing volume takes its state along).
            target = {"name": name, "directory": str(self.directories[name]),
                      "timeout_seconds": FIO_TIMEOUT_S, "profiles": [PROFILE],
                      "volume": {"dedicated": True}}  # fmt: skip
            if name == FAULTY:
                target.update(self.faulty_target)
            targets.append(target)
        pushgateway = {"url": self.url, "timeout_seconds": PUSH_TIMEOUT_S,
                       "attempts": PUSH_ATTEMPTS}  # fmt: skip
        self.config.write_text(yaml.safe_dump({"pushgateway": pushgateway, "targets": targets}))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "fioprobe", "run", "--config", str(self.config),
                "--jobs-dir", str(self.jobs)]  # fmt: skip

    def run(self) -> tuple[int, str, float]:
        """One `fioprobe run`; (exit status, stderr, seconds)."""
        self.write_config()
        began = time.monotonic()
        result = subprocess.run(self.command(), capture_output=True, timeout=RUN_BOUND_S + 30,
                                stdin=subprocess.DEVNULL)  # fmt: skip
        elapsed = time.monotonic() - began
        stderr = result.stderr.decode(errors="replace")
        assert "Traceback" not in stderr, stderr
        assert elapsed < RUN_BOUND_S, f"run took {elapsed:.1f}s, bound {RUN_BOUND_S:.1f}s"
        self.rounds.append(result)
        return result.returncode, stderr, elapsed

    def state_files(self, name: str) -> list[Path]:
        configured = self.faulty_target.get("state_dir") if name == FAULTY else None
        base = Path(configured) if configured else self.directories[name] / ".fioprobe-state"
        return sorted(base.glob("*.json")) if base.is_dir() else []


@pytest.fixture
def matrix(tmp_path: Path, pushgateway: services.Service) -> Iterator[Matrix]:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / f"{PROFILE}.fio").write_text(PROFILE_TEXT)
    directories = {}
    for name in TARGETS:
        directories[name] = tmp_path / "volumes" / name
        directories[name].mkdir(parents=True)
    m = Matrix(tmp_path, pushgateway, jobs, directories, pushgateway.url)
    try:
        yield m
    finally:
        for cleanup in reversed(m.cleanups):
            cleanup()


def assert_neighbours_pushed(m: Matrix, runs: int) -> None:
    """The first and the last target pushed every one of their `runs` runs."""
    now = groups(m.gateway)
    for name in (FIRST, LAST):
        assert value(now[name], "fioprobe_success") == 1, name
        assert value(now[name], "fioprobe_runs_total") == runs, name
        assert_histogram_consistent(now[name])


def assert_failure_pushed(m: Matrix, expected: str, runs_counted: int) -> None:
    """The faulty target's group says `success 0` with `expected`, its counters untouched."""
    group = groups(m.gateway)[FAULTY]
    assert value(group, "fioprobe_success") == 0
    assert reason(group) == expected
    assert value(group, "fioprobe_runs_total") in (None, runs_counted)


def assert_lines(stderr: str, faulty_line: str) -> None:
    """One report line for the faulty target naming what happened; none for healthy ones."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    faulty = [line for line in lines if f"'storageclass': '{FAULTY}'" in line]
    assert len(faulty) == 1, stderr
    assert faulty_line in faulty[0], faulty[0]
    assert all(line.startswith("fioprobe: ") for line in lines), stderr


def healthy_round(m: Matrix, runs: int) -> None:
    code, stderr, _ = m.run()
    assert code == 0, stderr
    assert_neighbours_pushed(m, runs)
    group = groups(m.gateway)[FAULTY]
    assert value(group, "fioprobe_success") == 1
    assert_histogram_consistent(group)


# --- disk and volume faults ------------------------------------------------------------------


def test_read_only_remount(matrix: Matrix) -> None:
    """The volume is remounted read-only between runs (what ext4 does on a disk error)."""
    m = matrix
    volume = m.directories[FAULTY]
    mount_tmpfs(volume, "16m")
    m.cleanups.append(lambda: unmount(volume))
    healthy_round(m, 1)
    subprocess.run(["mount", "-o", "remount,ro", str(volume)], check=True, timeout=30)
    code, stderr, _ = m.run()
    assert code == 1, stderr
    assert_lines(stderr, "FAILED (read_only)")
    assert_failure_pushed(m, "read_only", runs_counted=1)
    assert_neighbours_pushed(m, 2)
    subprocess.run(["mount", "-o", "remount,rw", str(volume)], check=True, timeout=30)
    healthy_round(m, 3)
    # The read-only run could not be saved on the read-only volume: not counted, never
    # double counted; the state is intact and continues.
    assert value(groups(m.gateway)[FAULTY], "fioprobe_runs_total") == 2
    assert sorted(p.name for p in volume.iterdir()) == [".fioprobe-state"]


def test_full_dedicated_gp2_volume(matrix: Matrix) -> None:
    """A full dedicated gp2 volume: no room for fio nor for the credit model's state."""
    m = matrix
    volume = m.directories[FAULTY]
    mount_tmpfs(volume, "24m")
    m.cleanups.append(lambda: unmount(volume))
    m.faulty_target = {"volume": {"type": "gp2", "size": "100Gi", "dedicated": True}}
    healthy_round(m, 1)
    assert value(groups(m.gateway)[FAULTY], "fioprobe_volume_burst_balance_ratio") is not None
    fill(volume)
    code, stderr, _ = m.run()
    assert code == 1, stderr
    assert_lines(stderr, "FAILED (no_space)")
    assert_failure_pushed(m, "no_space", runs_counted=1)
    assert_neighbours_pushed(m, 2)
    (volume / "filler").unlink()
    healthy_round(m, 3)
    assert value(groups(m.gateway)[FAULTY], "fioprobe_runs_total") in (2, 3)
    assert sorted(p.name for p in volume.iterdir()) == [".fioprobe-state"]


def test_disk_failing_every_write_and_fsync(matrix: Matrix, tmp_path: Path) -> None:
    """A FUSE filesystem answering EIO to every write and fsync: a dying disk."""
    if reason_missing := fuse_unavailable():
        pytest.skip(reason_missing)
    m = matrix
    backing = tmp_path / "eio-backing"
    backing.mkdir()
    with slow_fs(backing, m.directories[FAULTY], fsync_delay_ms=0) as disk:
        healthy_round(m, 1)
        disk.set_delays(0, 0, fail_errno=errno.EIO)
        code, stderr, _ = m.run()
        assert code == 1, stderr
        assert_lines(stderr, "FAILED (io_error)")
        assert_failure_pushed(m, "io_error", runs_counted=1)
        assert_neighbours_pushed(m, 2)
        disk.set_delays(0, 0, fail_errno=0)
        healthy_round(m, 3)
        assert value(groups(m.gateway)[FAULTY], "fioprobe_runs_total") == 2
        leftovers = sorted(p.name for p in m.directories[FAULTY].iterdir())
        assert leftovers == [".fioprobe-state"], leftovers


def test_state_directory_not_permitted(matrix: Matrix, tmp_path: Path) -> None:
    """The state directory refuses new files (EPERM: an immutable directory)."""
    m = matrix
    state_volume = tmp_path / "state-volume"
    mount_tmpfs(state_volume, "1m")
    m.cleanups.append(lambda: unmount(state_volume))
    state_dir = state_volume / "state"
    state_dir.mkdir()
    m.faulty_target = {"state_dir": str(state_dir)}
    healthy_round(m, 1)
    for stale in state_dir.iterdir():
        stale.unlink()  # the volume was replaced by an empty one that refuses writes
    subprocess.run(["chattr", "+i", str(state_dir)], check=True, timeout=30)
    m.cleanups.append(lambda: subprocess.run(["chattr", "-i", str(state_dir)], check=False))
    code, stderr, _ = m.run()
    assert code == 1, stderr
    assert_lines(stderr, "FAILED (state_error)")
    assert "Operation not permitted" in stderr
    assert_failure_pushed(m, "state_error", runs_counted=1)
    assert_neighbours_pushed(m, 2)
    subprocess.run(["chattr", "-i", str(state_dir)], check=True, timeout=30)
    healthy_round(m, 3)
    # A fresh state reads the group back: the counters continue from the gateway's 1.
    assert value(groups(m.gateway)[FAULTY], "fioprobe_runs_total") == 2


def test_state_path_is_a_file(matrix: Matrix) -> None:
    """A file where the state directory should be."""
    m = matrix
    healthy_round(m, 1)
    state = m.directories[FAULTY] / ".fioprobe-state"
    for stale in state.iterdir():
        stale.unlink()
    state.rmdir()
    state.write_text("not a directory\n")
    code, stderr, _ = m.run()
    assert code == 1, stderr
    assert_lines(stderr, "FAILED (state_error)")
    assert_failure_pushed(m, "state_error", runs_counted=1)
    assert_neighbours_pushed(m, 2)
    assert state.read_text() == "not a directory\n"  # what is not ours is left alone


@pytest.mark.parametrize("variant", ["missing", "unmounted"])
def test_missing_or_unmounted_directory(matrix: Matrix, variant: str) -> None:
    """The probe directory is gone, or the volume that should be mounted there is not."""
    m = matrix
    if variant == "missing":
        m.directories[FAULTY].rmdir()
    else:
        m.faulty_target = {"require_mount_point": True}  # a plain directory: nothing mounted
    code, stderr, _ = m.run()
    assert code == 1, stderr
    assert_lines(stderr, "FAILED (no_directory)")
    assert_failure_pushed(m, "no_directory", runs_counted=0)
    assert_neighbours_pushed(m, 1)
    if variant == "missing":
        assert not m.directories[FAULTY].exists()  # never created by the probe
    else:
        assert list(m.directories[FAULTY].iterdir()) == []  # nothing written into it


# --- Pushgateway faults ---------------------------------------------------------------------


def is_faulty_push(request: hostile.Request) -> bool:
    path = request.path.split("?")[0] + "/"
    return request.method in ("PUT", "POST") and f"/storageclass/{FAULTY}/" in path


def is_read_back(request: hostile.Request) -> bool:
    return request.method == "GET"


def nested(depth: int) -> hostile.Behaviour:
    body = b'{"status":"success","data":' + b"[" * depth + b"]" * depth + b"}"
    return hostile.answer(200, body, {"Content-Type": "application/json"}, "OK")


GATEWAY_FAULTS: dict[str, tuple[hostile.Behaviour, Callable[[hostile.Request], bool]]] = {
    "html-200-on-push": (
        hostile.answer(
            200, b"<html>Please log in</html>", {"Content-Type": "text/html; charset=utf-8"}
        ),
        is_faulty_push,
    ),
    "302-on-push": (hostile.redirect(302, "http://127.0.0.1:9/login"), is_faulty_push),
    "byte-every-2s-on-push": (hostile.drip_head(2.0), is_faulty_push),
    "html-200-on-read-back": (
        hostile.answer(200, b"<html>maintenance</html>", {"Content-Type": "text/html"}, "OK"),
        is_read_back,
    ),
    "truncated-read-back": (hostile.truncated(announced=5000, sent=100), is_read_back),
    "nested-json-read-back": (nested(100_000), is_read_back),
    "byte-every-2s-on-read-back": (hostile.drip_body(2.0), is_read_back),
}


def forget_last_push(state_file: Path) -> None:
    """Make the state's last push older than the writer lease: what a probe suspended for
    hours looks like, and the case in which it reads the group back before pushing."""
    data = json.loads(state_file.read_text())
    data["last_push_at"] = time.time() - 10 * 24 * 3600
    state_file.write_text(json.dumps(data))


@pytest.mark.parametrize("fault", sorted(GATEWAY_FAULTS))
def test_gateway_fault_keeps_the_run_and_pushes_it_once(matrix: Matrix, fault: str) -> None:
    """Only the faulty target's exchange is broken (a front relays the rest to the real
    gateway). Its run is kept, the others push, and the next run pushes it exactly once."""
    m = matrix
    behaviour, applies = GATEWAY_FAULTS[fault]
    armed = threading.Event()
    relay = hostile.forward(m.gateway.url)
    front = hostile.HostileServer(
        hostile.selective(behaviour, lambda r: armed.is_set() and applies(r), relay),
        max_connections=500,
    )
    with front:
        m.url = front.url
        healthy_round(m, 1)
        healthy_round(m, 2)  # every state has outlived a run: each writer owns its group
        if applies is is_read_back:
            (state_file,) = m.state_files(FAULTY)
            forget_last_push(state_file)  # only the faulty target reads back this time
        armed.set()
        code, stderr, elapsed = m.run()
        armed.clear()
        assert code == 4, (stderr, [(r.method, r.path) for r in front.requests])
        assert_lines(stderr, "the run is kept in")
        assert_neighbours_pushed(m, 3)
        group = groups(m.gateway)[FAULTY]
        assert value(group, "fioprobe_runs_total") == 2  # nothing of the faulty run arrived
        assert value(group, "fioprobe_success") == 1
        healthy_round(m, 4)
        assert value(groups(m.gateway)[FAULTY], "fioprobe_runs_total") == 4
        assert front.requests  # the runs really went through the front
    print(f"{fault}: faulty run took {elapsed:.1f}s (bound {RUN_BOUND_S:.0f}s)")


def test_read_back_of_another_bucket_layout_starts_a_clean_series(matrix: Matrix) -> None:
    """Someone else pushed the group with other buckets: the read-back drops what it cannot
    continue, the probe pushes its own layout, never decreasing buckets or negative counts."""
    m = matrix
    healthy_round(m, 1)
    healthy_round(m, 2)
    foreign = "\n".join([
        "# TYPE fioprobe_sync_latency_seconds histogram",
        'fioprobe_sync_latency_seconds_bucket{le="0.0007"} 300',
        'fioprobe_sync_latency_seconds_bucket{le="0.003"} 575',
        'fioprobe_sync_latency_seconds_bucket{le="+Inf"} 600',
        "fioprobe_sync_latency_seconds_sum 0.9",
        "fioprobe_sync_latency_seconds_count 600",
        "# TYPE fioprobe_runs_total counter",
        "fioprobe_runs_total 7",
        "",
    ]).encode()  # fmt: skip
    request = urllib.request.Request(
        f"{m.gateway.url}/metrics/job/fioprobe/storageclass/{FAULTY}/profile/{PROFILE}",
        data=foreign, method="PUT",
    )  # fmt: skip
    urllib.request.urlopen(request, timeout=5).close()
    (state_file,) = m.state_files(FAULTY)
    forget_last_push(state_file)
    code, stderr, _ = m.run()
    assert code == 0, stderr
    assert_neighbours_pushed(m, 3)
    group = groups(m.gateway)[FAULTY]
    assert_histogram_consistent(group)
    bounds = [le for le, _ in histogram(group)[1]]
    assert 0.0007 not in bounds and 0.003 not in bounds  # fioprobe's own layout only
    runs = value(group, "fioprobe_runs_total")
    assert runs is not None and runs >= 7  # never backwards from what the gateway held
    healthy_round(m, 4)
    after = groups(m.gateway)[FAULTY]
    assert value(after, "fioprobe_runs_total") == runs + 1
    assert histogram(after)[0] >= histogram(group)[0]


@pytest.mark.parametrize("moment", ["before-the-gateway-stores", "after-the-gateway-stores"])
def test_sigkill_between_state_save_and_push(matrix: Matrix, moment: str) -> None:
    """The process dies (OOM kill, node loss) while its push is in flight, after the state
    was saved. The next run pushes the killed run exactly once, whether or not it arrived."""
    m = matrix
    holding = threading.Event()
    release = threading.Event()
    armed = threading.Event()
    relay = hostile.forward(m.gateway.url)

    def hold(exchange: hostile.Exchange) -> None:
        if moment == "after-the-gateway-stores":
            # Store it upstream, then never answer before the kill.
            upstream = hostile.forward(m.gateway.url)
            sink = _Sink()
            upstream(hostile.Exchange(sink, exchange.request, threading.Event()))  # type: ignore[arg-type]
        holding.set()
        release.wait(60)

    front = hostile.HostileServer(
        hostile.selective(hold, lambda r: armed.is_set() and is_faulty_push(r), relay),
        max_connections=500,
    )
    with front:
        m.url = front.url
        healthy_round(m, 1)
        healthy_round(m, 2)
        armed.set()
        m.write_config()
        try:
            returncode, _ = signal_during_faulty_push(m, holding, signal.SIGKILL)
        finally:
            release.set()
            armed.clear()
        assert returncode == -signal.SIGKILL
        before = groups(m.gateway)
        stored = moment == "after-the-gateway-stores"
        assert value(before[FAULTY], "fioprobe_runs_total") == (3 if stored else 2)
        assert value(before[LAST], "fioprobe_runs_total") == 2  # never reached this round
        code, stderr, _ = m.run()
        assert code == 0, stderr
        after = groups(m.gateway)
        assert value(after[FIRST], "fioprobe_runs_total") == 4
        assert value(after[FAULTY], "fioprobe_runs_total") == 4  # the killed run, once
        assert value(after[LAST], "fioprobe_runs_total") == 3
        for name in TARGETS:
            assert_histogram_consistent(after[name])
            leftovers = sorted(p.name for p in m.directories[name].iterdir())
            assert leftovers == [".fioprobe-state"], (name, leftovers)


def signal_during_faulty_push(m: Matrix, holding: threading.Event, signum: int) -> tuple[int, str]:
    """Run the matrix, send `signum` once the faulty target's push is held by the front;
    the exit status and stderr (the process is never left running)."""
    process = subprocess.Popen(m.command(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        assert holding.wait(60), "the faulty target's push never arrived"
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    return process.returncode, stderr.decode()


class _Sink:
    """A socket stand-in that swallows the relayed answer (the client never gets it)."""

    def sendall(self, data: bytes) -> None:
        del data


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_signal_while_the_push_is_in_flight(matrix: Matrix, signum: int) -> None:
    """A stop signal during the faulty target's push: the push finishes (it is bounded by the
    deadline), the run is counted once, the command then stops (128 + signal) and says what
    was done; the last target is not started."""
    m = matrix
    holding = threading.Event()
    armed = threading.Event()
    relay = hostile.forward(m.gateway.url)

    def slow_then_forward(exchange: hostile.Exchange) -> None:
        holding.set()
        time.sleep(1.0)  # within the 2 s deadline: the push succeeds
        relay(exchange)

    front = hostile.HostileServer(
        hostile.selective(slow_then_forward, lambda r: armed.is_set() and is_faulty_push(r),
                          relay),
        max_connections=500,
    )  # fmt: skip
    with front:
        m.url = front.url
        healthy_round(m, 1)
        healthy_round(m, 2)
        armed.set()
        m.write_config()
        returncode, stderr = signal_during_faulty_push(m, holding, signum)
        assert returncode == 128 + signum, stderr
        assert "Traceback" not in stderr
        name = signal.Signals(signum).name
        assert f"interrupted by {name}; the run had finished; its outcome was pushed" in stderr
        now = groups(m.gateway)
        assert value(now[FAULTY], "fioprobe_runs_total") == 3
        assert value(now[FAULTY], "fioprobe_success") == 1
        assert value(now[LAST], "fioprobe_runs_total") == 2  # not started after the signal
        armed.clear()
        code, stderr, _ = m.run()
        assert code == 0, stderr
        after = groups(m.gateway)
        runs = {name: value(after[name], "fioprobe_runs_total") for name in TARGETS}
        assert runs == {FIRST: 4, FAULTY: 4, LAST: 3}
