"""A probed volume that stops answering: one deadline per run, kept whatever the disk does.

The disk is the slow FUSE filesystem (fioprobe.demo.slowdisk) with every write and fsync held
for minutes: a process that writes there sleeps in the kernel until the answer comes, as on
a hung network volume. What must hold: the process that pushes never waits for the volume;
the run pushes `timeout` (never the error of a clean-up that came after) and returns within
its deadline plus the push; the next run does not pile up behind a process still stuck, says
so and pushes `timeout` again; once the disk answers, what was left behind is removed.

Every FUSE mount is made through `slow_dir_factory`, which unmounts (lazily if it must) and
stops the filesystem's process by PID at teardown, also when a test fails; stopping it
aborts the requests still held, which ends any process stuck on them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge, wait_for
from fioprobe.errors import FailureReason
from fioprobe.probe.directory import RunDir, open_probe_directory
from fioprobe.probe.prober import PUBLISH_ON_VOLUME_SECONDS
from fioprobe.target.stuck import Marker
from support import services
from support.fixtures import slow_dir_factory
from support.slowfs import SlowFs, force_unmount

__all__ = ["slow_dir_factory"]

#: Every write and fsync of the hung disk is held this long.
HANG_MS = 120_000
#: What the acceptance allows a `--probe-timeout 10` run on the hung disk, push included.
RETURNS_WITHIN_SECONDS = 60


def probe(
    disk: Path, gateway: services.Service, env: dict[str, str], *extra: str
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(disk), "--storageclass",
                      "hung", "--gateway", gateway.url, *extra, env=env, timeout=150)  # fmt: skip
    return result, time.monotonic() - started


def reason_of(group: dict[str, list[dict]]) -> str:
    (info,) = group["fioprobe_failure_reason_info"]
    return info["labels"]["reason"]


@pytest.fixture
def hung_disk(slow_dir_factory: Callable[..., SlowFs]) -> Iterator[SlowFs]:
    """The FUSE disk holding every write and fsync HANG_MS. At teardown its process is
    killed first (by PID): that aborts the held requests, so whatever is stuck on them ends
    at once; then the factory's teardown unmounts (lazily if it must)."""
    disk = slow_dir_factory(HANG_MS, HANG_MS)
    try:
        yield disk
    finally:
        if disk.proc.poll() is None:
            disk.proc.kill()
            disk.proc.wait(timeout=30)
        force_unmount(disk.mountpoint)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The probe's own state directory (off the probed volume) for every command."""
    return {**os.environ, "FIOPROBE_STATE_DIR": str(tmp_path / "state")}


def stuck_pid(disk: Path, state: Path) -> int | None:
    """The process the marker of `disk` names, if there is one."""
    stuck = Marker.for_directory(disk, state).read()
    return None if stuck is None else stuck.pid


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            line = handle.read()
    except OSError:
        return False
    return line[line.rfind(b")") + 2 : line.rfind(b")") + 3] not in (b"Z", b"X")


@pytest.mark.slow
def test_probe_on_a_hung_volume_pushes_timeout_and_the_next_run_does_not_pile_up(
    tmp_path: Path,
    pushgateway: services.Service,
    hung_disk: SlowFs,
    env: dict[str, str],
) -> None:
    disk = hung_disk
    first, seconds = probe(disk.mountpoint, pushgateway, env, "--probe-timeout", "10")
    stderr = first.stderr.decode()
    assert seconds < RETURNS_WITHIN_SECONDS, (seconds, stderr)
    assert first.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "FAILED (timeout)" in stderr and "stuck in the kernel" in stderr, stderr
    group = gateway_group(pushgateway, storageclass="hung", profile="etcd-fsync")
    assert group is not None
    assert gauge(group, "fioprobe_success") == 0
    assert reason_of(group) == FailureReason.TIMEOUT
    # The publish is in the pushed duration: it is at least the volume's deadline.
    assert gauge(group, "fioprobe_duration_seconds") >= 10
    pid = stuck_pid(disk.mountpoint, tmp_path / "state")
    assert pid is not None and alive(pid), "the abandoned child is written down"

    second, seconds = probe(disk.mountpoint, pushgateway, env, "--probe-timeout", "10")
    stderr = second.stderr.decode()
    assert seconds < RETURNS_WITHIN_SECONDS, (seconds, stderr)
    assert second.returncode == 1, stderr
    assert "FAILED (timeout)" in stderr and "previous run is still stuck" in stderr, stderr
    group = gateway_group(pushgateway, storageclass="hung", profile="etcd-fsync")
    assert reason_of(group) == FailureReason.TIMEOUT
    assert gauge(group, "fioprobe_failures_total") == 2

    # The disk answers again, what it held too: the held write returns, the pending SIGKILL
    # ends the child.
    disk.set_delays(0, 0, release=True)
    deadline = time.monotonic() + 60
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive(pid)
    third, _ = probe(disk.mountpoint, pushgateway, env)
    stderr = third.stderr.decode()
    assert third.returncode == 0, stderr
    assert "stuck process has ended" in stderr, stderr
    assert sorted(os.listdir(disk.mountpoint)) == []  # what the stuck child left is gone
    assert list((tmp_path / "state").glob("stuck-*.json")) == []
    group = gateway_group(pushgateway, storageclass="hung", profile="etcd-fsync")
    assert gauge(group, "fioprobe_success") == 1


@pytest.mark.slow
def test_a_slow_fsync_after_the_timeout_is_a_timeout_not_the_cleanup_error(
    pushgateway: services.Service, slow_dir_factory: Callable[..., SlowFs], env: dict[str, str]
) -> None:
    """fio times out in a 20 s fsync; stopping it and removing its files then fail or
    hang too: the run's reason stays `timeout`, within the deadline (3 s + the margin)."""
    disk = slow_dir_factory(20_000)
    result, seconds = probe(disk.mountpoint, pushgateway, env, "--probe-timeout", "3")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "FAILED (timeout)" in stderr, stderr
    assert seconds < 3 + 25 + 20, (seconds, stderr)
    group = gateway_group(pushgateway, storageclass="hung", profile="etcd-fsync")
    assert reason_of(group) == FailureReason.TIMEOUT


@pytest.mark.slow
@pytest.mark.parametrize("dedicated", [False, True], ids=["shared", "dedicated"])
def test_run_with_the_middle_target_hung_pushes_the_others_on_time(
    tmp_path: Path,
    pushgateway: services.Service,
    hung_disk: SlowFs,
    env: dict[str, str],
    dedicated: bool,
) -> None:
    """A dedicated volume keeps its state on itself: that state is not touched while the
    volume hangs (the failure is pushed beside the group's counters)."""
    first, last = tmp_path / "first", tmp_path / "last"
    first.mkdir()
    last.mkdir()
    hung = hung_disk.mountpoint
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: {pushgateway.url}}}\n"
        "targets:\n"
        f"  - {{name: first, directory: {first}, profiles: [etcd-fsync], timeout_seconds: 10}}\n"
        f"  - {{name: hung, directory: {hung}, profiles: [etcd-fsync], timeout_seconds: 10,"
        f" volume: {{dedicated: {str(dedicated).lower()}}}}}\n"
        f"  - {{name: last, directory: {last}, profiles: [etcd-fsync], timeout_seconds: 10}}\n"
    )
    started = time.monotonic()
    result = fioprobe("run", "--config", str(config), env=env, timeout=150)
    seconds = time.monotonic() - started
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "Traceback" not in stderr
    # Two healthy runs and one deadline (10 s + 25 s) with its push: well within 90 s.
    assert seconds < 90, (seconds, stderr)
    for name in ("first", "last"):
        group = gateway_group(pushgateway, storageclass=name, profile="etcd-fsync")
        assert group is not None and gauge(group, "fioprobe_success") == 1, (name, stderr)
    group = gateway_group(pushgateway, storageclass="hung", profile="etcd-fsync")
    assert group is not None and reason_of(group) == FailureReason.TIMEOUT
    if dedicated:
        assert "fioprobe_runs_total" not in group  # the counters stay as they were (none)
        assert not (hung / ".fioprobe-state").exists()


# --- a state kept on the volume: the publish runs in a child too ----------------------------

#: fsync and fdatasync by syscall number (/proc/<pid>/syscall), per machine.
_FSYNC_SYSCALLS = {"x86_64": {"74", "75"}, "aarch64": {"82", "83"}}


def reading_probe(disk: Path, gateway: services.Service, timeout_s: int = 10) -> list[str]:
    """A dedicated-volume probe whose fio reads: after fio's layout, the only fsync of the
    run is the state's save."""
    return [sys.executable, "-m", "fioprobe", "probe", "--profile", "randread-iops", "--dir",
            str(disk), "--dedicated", "--storageclass", "hungstate", "--gateway", gateway.url,
            "--probe-timeout", str(timeout_s)]  # fmt: skip


#: libaio's io_submit, io_getevents and io_pgetevents by syscall number, per machine.
_AIO_SYSCALLS = {"x86_64": {"208", "209", "333"}, "aarch64": {"2", "4", "292"}}


def fio_reading(disk: Path) -> bool:
    """Whether a fio thread working in `disk` is in a libaio call: the reads have begun, so
    the layout (and its fsync) is over."""
    aio = _syscalls(_AIO_SYSCALLS)
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/comm") as handle:
                if handle.read().strip() != "fio":
                    continue
            links = [os.readlink(f.path) for f in os.scandir(f"/proc/{entry.name}/fd")]
            if not any(link.startswith(str(disk)) for link in links):
                continue
            for task in os.scandir(f"/proc/{entry.name}/task"):
                with open(f"{task.path}/syscall") as handle:
                    if handle.read().split()[0] in aio:
                        return True
        except (OSError, IndexError):
            continue
    return False


def _syscalls(table: dict[str, set[str]]) -> set[str]:
    machine = os.uname().machine
    if machine not in table:
        pytest.skip(f"syscall numbers of {machine} are not listed here")
    return table[machine]


@contextlib.contextmanager
def reading_probe_started(
    disk: SlowFs, gateway: services.Service, env: dict[str, str], fsync_ms: float
) -> Iterator[subprocess.Popen[bytes]]:
    """The reading probe, started on a disk that answers at once; once fio reads (its
    layout's fsync, create_fsync, is over), every fsync takes `fsync_ms`: the next one is
    the state's save. The probe is killed on the way out if it is still there."""
    probe = subprocess.Popen(reading_probe(disk.mountpoint, gateway), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for(lambda: fio_reading(disk.mountpoint), timeout=60, interval=0.05,
                 what="fio's reads")  # fmt: skip
        disk.set_delays(fsync_ms, 0)
        yield probe
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait(timeout=30)


def run_reading_probe(
    disk: Path, gateway: services.Service, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """The run after the disk answers again. Its timeout is not what is tested: 60 s, a
    loaded machine's margin (fio's reads through the FUSE disk, itself a Python process, took
    over 10 s on a 2-core machine busy with promtool)."""
    return subprocess.run(reading_probe(disk, gateway, timeout_s=60), env=env,
                          capture_output=True, timeout=150, check=False)  # fmt: skip


def children_in_fsync(parent: int) -> list[int]:
    """Children of `parent` that sit in fsync or fdatasync right now."""
    fsyncs = _syscalls(_FSYNC_SYSCALLS)
    found = []
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != parent:
                continue
            with open(f"/proc/{entry.name}/syscall") as handle:
                if handle.read().split()[0] in fsyncs:
                    found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def temporaries(state: Path) -> list[str]:
    return [p.name for p in state.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_a_state_on_the_volume_that_hangs_is_a_timeout_pushed_by_the_parent(
    tmp_path: Path,
    pushgateway: services.Service,
    slow_dir_factory: Callable[..., SlowFs],
    env: dict[str, str],
) -> None:
    """A dedicated volume keeps its state on itself, so the publish runs in a child as
    well. fio only reads; then the state's fsync hangs: past PUBLISH_ON_VOLUME_SECONDS the
    child is abandoned and written down, and `timeout` is pushed by the parent with the
    group's counters as they were. Once the disk answers, the next run counts again and the
    temporary file the killed child left is gone."""
    disk = slow_dir_factory(0)
    started = time.monotonic()
    with reading_probe_started(disk, pushgateway, env, HANG_MS) as probe:
        _, stderr_bytes = probe.communicate(timeout=200)
    seconds = time.monotonic() - started
    stderr = stderr_bytes.decode()
    assert probe.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "FAILED (timeout)" in stderr, stderr
    assert f"did not answer within {PUBLISH_ON_VOLUME_SECONDS:g}s" in stderr, stderr
    # fio (10 s at most, with its margin), the publish's deadline, the push.
    assert PUBLISH_ON_VOLUME_SECONDS <= seconds < 10 + 25 + PUBLISH_ON_VOLUME_SECONDS + 30
    group = gateway_group(pushgateway, storageclass="hungstate", profile="randread-iops")
    assert group is not None and reason_of(group) == FailureReason.TIMEOUT
    assert "fioprobe_runs_total" not in group  # the run is not counted
    pid = stuck_pid(disk.mountpoint, tmp_path / "state")
    assert pid is not None and alive(pid), "the abandoned publish is written down"
    state = disk.mountpoint / ".fioprobe-state"
    assert temporaries(state) != []  # the save it was making

    disk.set_delays(0, 0, release=True)  # the disk answers again, the held fsync too
    deadline = time.monotonic() + 60
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive(pid)
    second = run_reading_probe(disk.mountpoint, pushgateway, env)
    stderr = second.stderr.decode()
    assert second.returncode == 0, stderr
    assert "stuck process has ended" in stderr, stderr
    group = gateway_group(pushgateway, storageclass="hungstate", profile="randread-iops")
    assert gauge(group, "fioprobe_success") == 1
    assert gauge(group, "fioprobe_runs_total") == 1
    assert temporaries(state) == []


@pytest.mark.slow
def test_a_publish_child_killed_on_the_volume_is_a_state_error_pushed_by_the_parent(
    tmp_path: Path,
    pushgateway: services.Service,
    slow_dir_factory: Callable[..., SlowFs],
    env: dict[str, str],
) -> None:
    """The publish's child dies (killed from outside) while its save waits for a slow
    fsync: whether the state was saved is unknown, so the run is not counted and its
    failure (`state_error`) is pushed by the parent; the next run removes what it left."""
    disk = slow_dir_factory(0)
    started = time.monotonic()
    with reading_probe_started(disk, pushgateway, env, 5_000) as probe:
        killed = []
        while not killed and probe.poll() is None and time.monotonic() < started + 60:
            for child in children_in_fsync(probe.pid):
                os.kill(child, signal.SIGKILL)
                killed.append(child)
            time.sleep(0.05)
        _, stderr_bytes = probe.communicate(timeout=60)
    stderr = stderr_bytes.decode()
    assert killed, f"no child of the probe was seen in fsync: {stderr}"
    assert probe.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert "FAILED (state_error)" in stderr, stderr
    group = gateway_group(pushgateway, storageclass="hungstate", profile="randread-iops")
    assert group is not None and reason_of(group) == FailureReason.STATE_ERROR
    assert "fioprobe_runs_total" not in group  # not counted: the save's fate is unknown

    disk.set_delays(0, 0)
    second = run_reading_probe(disk.mountpoint, pushgateway, env)
    assert second.returncode == 0, second.stderr.decode()
    assert temporaries(disk.mountpoint / ".fioprobe-state") == []


# --- FUSE's hidden files -------------------------------------------------------------------


@pytest.fixture
def fuse_disk(slow_dir_factory: Callable[..., SlowFs]) -> Iterator[Path]:
    yield slow_dir_factory(0).mountpoint


def _hide_a_file(run_dir: RunDir) -> int:
    """A file of the run directory unlinked while open: FUSE keeps it as `.fuse_hidden*`
    until its last descriptor is released, so the directory is not empty meanwhile."""
    fd = os.open("data", os.O_RDWR | os.O_CREAT, 0o600, dir_fd=run_dir.fd)
    os.write(fd, b"x" * 4096)
    os.unlink("data", dir_fd=run_dir.fd)
    assert [n.startswith(".fuse_hidden") for n in os.listdir(run_dir.pinned_path)] == [True]
    return fd


def test_run_directory_removal_waits_for_fuse_hidden_files(fuse_disk: Path) -> None:
    """The hidden file is released a moment after the run (as FUSE releases fio's files
    after fio exits): the removal waits for it, the run keeps its outcome, nothing is left."""
    with open_probe_directory(fuse_disk) as directory, directory.private_run_dir() as run_dir:
        fd = _hide_a_file(run_dir)
        threading.Timer(0.2, os.close, (fd,)).start()
    assert os.listdir(fuse_disk) == []


def test_fuse_hidden_files_that_stay_are_left_for_the_next_run(fuse_disk: Path) -> None:
    with open_probe_directory(fuse_disk) as directory:
        with directory.private_run_dir() as run_dir:
            fd = _hide_a_file(run_dir)
        os.close(fd)  # released only after the run ended: no failure, the directory stays
        with directory.private_run_dir():
            pass  # the next run removes it first
    assert os.listdir(fuse_disk) == []


@pytest.mark.slow
def test_a_stuck_continuous_writer_holds_nothing_of_the_stream(
    tmp_path: Path, hung_disk: SlowFs
) -> None:
    """The stream's writer is a child left behind when stuck; it must not hold the stream's
    stderr either, or whoever reads that (a shell, a log collector) waits for the disk."""
    stream = _stream(hung_disk.mountpoint, services.free_port())
    try:
        deadline = time.monotonic() + 30
        while not (hung_disk.mountpoint / ".fioprobe-continuous").exists():
            assert time.monotonic() < deadline, "the writer never started"
            time.sleep(0.2)
        time.sleep(2)  # its preallocation and fdatasync are held by the disk now
        stopped = time.monotonic()
        stream.send_signal(signal.SIGTERM)
        _, stderr = stream.communicate(timeout=30)
        seconds = time.monotonic() - stopped
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait(timeout=30)
    text = stderr.decode(errors="replace")
    assert stream.returncode == 0, text
    assert seconds < 10, (seconds, text)
    assert "stuck in the kernel and is left behind" in text, text


def _stream(disk: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "continuous", "--listen", f"127.0.0.1:{port}",
         "--dir", str(disk), "--storageclass", "hung", "--interval", "0.5"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def _stop(stream: subprocess.Popen[bytes]) -> str:
    if stream.poll() is None:
        stream.send_signal(signal.SIGTERM)
    try:
        _, stderr = stream.communicate(timeout=30)
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait(timeout=30)
    return stderr.decode(errors="replace")


def _stream_value(port: int, name: str) -> float | None:
    """The stream's one sample of `name`; None while it does not answer yet."""
    try:
        samples = services.scrape(f"http://127.0.0.1:{port}/metrics")
    except OSError:
        return None
    (value,) = [v for (n, _), v in samples.items() if n == name]
    return value


@pytest.mark.slow
def test_a_stream_started_while_its_old_writer_is_stuck_starts_none_behind_it(
    slow_dir_factory: Callable[..., SlowFs],
) -> None:
    """The stream stops (a pod or service restart) while its writer hangs in the kernel;
    the next stream on that disk starts no writer behind it, says so, and shows the old
    writer's operation as outstanding since it was left behind (the hang alert carries
    on); once the disk answers and that writer has ended, it starts its own, which writes,
    and the old writer's file is gone. The disk holds every write and fsync 20 s: long
    enough to restart the stream behind the held one, short enough to see it end."""
    hung_disk = slow_dir_factory(20_000, 20_000)
    disk = hung_disk.mountpoint
    first = _stream(disk, services.free_port())
    try:
        wait_for(lambda: (disk / ".fioprobe-continuous").exists(), timeout=30,
                 what="the first writer's directory")  # fmt: skip
        time.sleep(2)  # its preallocation and fdatasync are held by the disk now
    finally:
        text = _stop(first)
    assert "stuck in the kernel and is left behind;" in text, text
    (old,) = [int(n.rpartition("-")[2]) for n in os.listdir(disk / ".fioprobe-continuous")]
    assert alive(old)

    port = services.free_port()
    second = _stream(disk, port)
    try:
        time.sleep(3)
        assert second.poll() is None
        inflight = wait_for(lambda: _stream_value(port, "fioprobe_continuous_inflight_seconds"),
                            timeout=30, what="the old writer's operation, outstanding")  # fmt: skip
        assert inflight >= 3
        # No writer of its own: the only file is the old writer's.
        assert os.listdir(disk / ".fioprobe-continuous") == [f"wal-{old}"]

        # New requests answer at once; the held one returns within its 20 s, and the old
        # writer dies of its pending SIGKILL.
        hung_disk.set_delays(0, 0)
        wait_for(lambda: (_stream_value(port, "fioprobe_continuous_operations_total") or 0) >= 3,
                 timeout=60, what="the new writer's writes")  # fmt: skip
        names = os.listdir(disk / ".fioprobe-continuous")
        assert len(names) == 1 and names != [f"wal-{old}"], names
        assert not alive(old)
    finally:
        text = _stop(second)
    assert second.returncode == 0, text
    assert "is still stuck in the kernel; no writer starts behind it" in text, text
    assert "has ended; starting one" in text, text
    assert not (disk / ".fioprobe-continuous").exists()
