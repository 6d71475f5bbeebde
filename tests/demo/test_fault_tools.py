"""The fault-injection tools work, proven with real fio.

Why: end-to-end tests and benchmarks conclude "the probe noticed a slow disk" from these
tools; if a tool silently injected nothing, those tests would pass for the wrong reason.
Numbers are fio's own (jobs[0].sync.lat_ns, write.iops), not our timing.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import fixtures as fx
from support import services, slowfs, throttle
from support.fiorun import job, run_fio
from support.slowfs import SlowFs, slow_fs
from support.throttle import ThrottledMount

# Fixtures from support.fixtures, bound to names in this module so pytest finds them (an
# import would do too, but linters then see the test arguments as redefinitions).
slow_dir_factory = fx.slow_dir_factory
slow_dir_15ms = fx.slow_dir_15ms
loop_mount_factory = fx.loop_mount_factory
throttled_loop_factory = fx.throttled_loop_factory
throttled_loop_mount = fx.throttled_loop_mount

MS = 1_000_000  # ns per ms

# The etcd disk check (and jobs/etcd-fsync.fio): 2300-byte sequential writes, fdatasync each.
ETCD_FSYNC = [
    "--ioengine=sync",
    "--rw=write",
    "--bs=2300",
    "--fdatasync=1",
    "--size=4m",
    "--runtime=3",
]
SEQWRITE_64K_QD4 = [
    "--ioengine=libaio",
    "--direct=1",
    "--rw=write",
    "--bs=64k",
    "--iodepth=4",
    "--size=64m",
    "--runtime=3",
    "--time_based",
]
RANDWRITE_4K_QD16 = [
    "--ioengine=libaio",
    "--direct=1",
    "--rw=randwrite",
    "--bs=4k",
    "--iodepth=16",
    "--size=64m",
    "--runtime=3",
    "--time_based",
]


@pytest.fixture(scope="module", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """After every test of this module: no mount, loop device or cgroup of ours remains."""
    yield
    left = slowfs.leftovers() + throttle.leftovers()
    assert not left, f"fault tools left resources behind: {left}"


def _sync_lat(result: dict) -> dict:
    """fio 3.33's fsync/fdatasync latency block (``jobs[0].sync.lat_ns``)."""
    lat: dict = job(result)["sync"]["lat_ns"]
    assert lat["N"] > 0, "fio reported no sync operations"
    return lat


# --------------------------------------------------------------------------------------
# slowfs
# --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_slowfs_fdatasync_latency_is_at_least_the_delay(slow_dir_15ms: SlowFs) -> None:
    """fio's own fdatasync latency is >= 15 ms through slowfs, far lower on the backing dir."""
    slow = _sync_lat(run_fio(ETCD_FSYNC, slow_dir_15ms.mountpoint, timeout_s=60))
    plain = _sync_lat(run_fio(ETCD_FSYNC, slow_dir_15ms.backing, timeout_s=60))

    assert slow["min"] >= 15 * MS, slow
    assert slow["mean"] >= 15 * MS, slow
    assert slow["percentile"]["50.000000"] >= 15 * MS, slow
    # Not inflated beyond the delay plus FUSE overhead either: the injected delay dominates.
    assert slow["mean"] < 45 * MS, slow
    assert plain["mean"] < 5 * MS, plain
    assert slow["mean"] > 5 * plain["mean"], (slow["mean"], plain["mean"])
    # Passthrough: fio's data file went to the backing directory.
    assert any(p.name.startswith("probe") for p in slow_dir_15ms.backing.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "options",
    [
        pytest.param(["--ioengine=psync", "--fsync=1", "--bs=4k"], id="psync-fsync"),
        pytest.param(["--ioengine=sync", "--sync=1", "--bs=4k"], id="sync-O_SYNC"),
        pytest.param(
            ["--ioengine=sync", "--direct=1", "--fdatasync=1", "--bs=2300"],
            id="sync-direct-fdatasync",
        ),
        pytest.param(
            ["--ioengine=libaio", "--direct=1", "--iodepth=8", "--fsync=4", "--bs=4k"],
            id="libaio-direct-fsync",
        ),
    ],
)
def test_slowfs_supports_fio_engines(
    slow_dir_factory: Callable[..., SlowFs], options: list[str]
) -> None:
    """direct=1 and O_SYNC work on slowfs (no EINVAL), and every sync path gets the delay."""
    fs = slow_dir_factory(10)
    res = run_fio(
        [*options, "--rw=write", "--size=1m", "--runtime=1", "--time_based"],
        fs.mountpoint,
        timeout_s=60,
    )
    j = job(res)
    assert j["error"] == 0
    assert j["write"]["total_ios"] > 0
    if "--sync=1" in options:
        # O_SYNC writes: the kernel sends FUSE FSYNC inside each write, so the write's own
        # completion latency carries the delay (fio reports no separate sync entry).
        assert j["write"]["clat_ns"]["min"] >= 10 * MS
    else:
        assert _sync_lat(res)["min"] >= 10 * MS


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_slowfs_delay_changes_while_mounted(slow_dir_factory: Callable[..., SlowFs]) -> None:
    """set_delays() turns a fast filesystem slow without remounting ("slow partway")."""
    fs = slow_dir_factory(0)
    fast = _sync_lat(run_fio(ETCD_FSYNC, fs.mountpoint, timeout_s=60))
    fs.set_delays(20)
    slow = _sync_lat(run_fio(ETCD_FSYNC, fs.mountpoint, timeout_s=60))
    assert fast["mean"] < 5 * MS, fast
    assert slow["min"] >= 20 * MS, slow


@pytest.mark.timeout(120)
def test_slowfs_release_answers_the_held_requests_at_once(
    slow_dir_factory: Callable[..., SlowFs],
) -> None:
    """A hung disk that answers again answers what it held: with `release`, an fdatasync
    held for a minute returns within seconds, where without it it waits out its minute."""
    fs = slow_dir_factory(0)
    fd = os.open(fs.mountpoint / "held", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, b"x")
        fs.set_delays(60_000)
        done: list[float] = []
        syncer = threading.Thread(target=lambda: (os.fdatasync(fd), done.append(time.monotonic())))
        syncer.start()
        time.sleep(1.0)
        assert not done, "the fdatasync was not held"
        released_at = time.monotonic()
        fs.set_delays(0, release=True, settle_s=0)
        syncer.join(timeout=30)
        assert done and done[0] - released_at < 30, "the held fdatasync waited out its delay"
    finally:
        fs.set_delays(0, release=True, settle_s=0)
        os.close(fd)


@pytest.mark.timeout(60)
def test_slowfs_posix_operations(slow_dir_factory: Callable[..., SlowFs]) -> None:
    """The operations fio and etcd use behave like the backing filesystem's."""
    fs = slow_dir_factory(1)
    m, b = fs.mountpoint, fs.backing

    (m / "d").mkdir()
    f = m / "d" / "f"
    with open(f, "w+b") as fh:
        fh.write(b"hello world")
        fh.flush()
        os.fdatasync(fh.fileno())
        os.fsync(fh.fileno())
        fh.seek(0)
        assert fh.read() == b"hello world"
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # etcd locks its WAL files
        fcntl.lockf(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fh.fileno(), 5)
    assert (b / "d" / "f").read_bytes() == b"hello"
    os.truncate(f, 2)
    assert f.stat().st_size == 2 == (b / "d" / "f").stat().st_size

    f.rename(m / "d" / "g")
    assert sorted(os.listdir(m / "d")) == ["g"] == sorted(os.listdir(b / "d"))
    os.symlink("g", m / "d" / "s")
    assert os.readlink(m / "d" / "s") == "g"
    os.link(m / "d" / "g", m / "d" / "h")
    assert (m / "d" / "h").stat().st_nlink == 2
    os.chmod(m / "d" / "g", 0o600)
    assert (b / "d" / "g").stat().st_mode & 0o777 == 0o600
    os.utime(m / "d" / "g", ns=(1_000_000_000, 2_000_000_000))
    assert (m / "d" / "g").stat().st_mtime_ns == 2_000_000_000

    dfd = os.open(m / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)  # fsyncdir: etcd syncs its directories after renames
    finally:
        os.close(dfd)
    assert os.statvfs(m).f_blocks == os.statvfs(b).f_blocks

    for name in ("g", "h", "s"):
        (m / "d" / name).unlink()
    (m / "d").rmdir()
    assert os.listdir(b) == []
    with pytest.raises(FileNotFoundError):
        (m / "missing").stat()
    (m / "x").mkdir()
    with pytest.raises(OSError) as e:
        (m / "x").mkdir()
    assert e.value.errno == errno.EEXIST
    (m / "x").rmdir()


@pytest.mark.timeout(60)
def test_slowfs_gives_new_entries_their_creators_owner() -> None:
    """Mounted by root for other users (as `make e2e` mounts it for pods running as 65532),
    what a user creates is that user's, with the parent's group under a setgid directory
    (fsGroup), and the user can go on working in the directory it has just made."""
    if os.geteuid() != 0:
        pytest.skip("needs root: only root mounts with allow_other and changes owners")
    if reason := fx.fuse_unavailable():
        pytest.skip(reason)
    top = Path(tempfile.mkdtemp(prefix="slowfs-owner-"))
    try:
        top.chmod(0o755)  # the probe user must reach the mountpoint
        (top / "b").mkdir()
        (top / "m").mkdir()
        os.chown(top / "b", 0, 2000)
        (top / "b").chmod(0o2777)  # setgid, group 2000: a volume after fsGroup
        (top / "b" / "plain").mkdir(mode=0o777)
        (top / "b" / "plain").chmod(0o777)
        with slow_fs(top / "b", top / "m", 0) as fs:
            script = (
                "import os, sys\n"
                "m = sys.argv[1]\n"
                "os.mkdir(m + '/state', 0o700)\n"
                "open(m + '/state/f', 'w').write('x')\n"
                "os.symlink('f', m + '/state/s')\n"
                "os.mkdir(m + '/plain/own', 0o700)\n"
                "open(m + '/plain/own/f', 'w').write('y')\n"
            )
            subprocess.run(
                # Debian's interpreter: the venv's lies under a directory 65532 cannot enter.
                ["/usr/bin/python3", "-c", script, str(fs.mountpoint)],
                user=65532,
                group=65532,
                extra_groups=[2000],
                check=True,
                timeout=30,
            )
            owners = {
                name: (st.st_uid, st.st_gid)
                for name in ("state", "state/f", "state/s", "plain/own", "plain/own/f")
                for st in [os.lstat(fs.mountpoint / name)]
            }
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert owners == {
        "state": (65532, 2000),
        "state/f": (65532, 2000),
        "state/s": (65532, 2000),
        "plain/own": (65532, 65532),
        "plain/own/f": (65532, 65532),
    }, owners


@pytest.mark.timeout(60)
def test_slow_fs_unmounts_even_when_the_body_raises(tmp_path: Path) -> None:
    """slow_fs() leaves no mount or process behind, and SIGTERM ends it cleanly."""
    if reason := fx.fuse_unavailable():
        pytest.skip(reason)
    (tmp_path / "b").mkdir()
    (tmp_path / "m").mkdir()
    handle: SlowFs | None = None
    with (
        pytest.raises(RuntimeError, match="boom"),
        slow_fs(tmp_path / "b", tmp_path / "m", 5) as fs,
    ):
        handle = fs
        assert slowfs.mount_fstype(fs.mountpoint) == "fuse.slowfs"
        assert slowfs.mount_points_under(tmp_path) == [os.path.realpath(tmp_path / "m")]
        assert slowfs.mount_points_under(tmp_path / "b") == []
        (fs.mountpoint / "file").write_text("x")
        raise RuntimeError("boom")
    assert handle is not None
    assert slowfs.mount_fstype(tmp_path / "m") is None
    assert slowfs.mount_points_under(tmp_path) == []
    assert handle.proc.returncode == 0, handle.proc.returncode  # SIGTERM, clean unmount
    assert (tmp_path / "b" / "file").read_text() == "x"


@pytest.mark.timeout(60)
def test_slow_fs_reports_a_failed_mount(tmp_path: Path) -> None:
    """A mount that cannot happen fails fast with slowfs's own message, nothing left over."""
    if reason := fx.fuse_unavailable():
        pytest.skip(reason)
    (tmp_path / "m").mkdir()
    with pytest.raises(FileNotFoundError), slow_fs(tmp_path / "nonexistent", tmp_path / "m", 5):
        pass
    (tmp_path / "b").mkdir()
    (tmp_path / "m" / "not-empty").write_text("x")  # libfuse refuses non-empty mountpoints
    start = time.monotonic()
    with (
        pytest.raises(RuntimeError, match="slowfs exited"),
        slow_fs(tmp_path / "b", tmp_path / "m", 5),
    ):
        pass
    assert time.monotonic() - start < 10
    assert slowfs.mount_fstype(tmp_path / "m") is None


# --------------------------------------------------------------------------------------
# loop devices + blkio throttling
# --------------------------------------------------------------------------------------


def _prepare_file(tm: ThrottledMount, size: str = "64m") -> None:
    """Lay out fio's data file unthrottled, so runs measure IO, not file creation."""
    run_fio(["--create_only=1", f"--size={size}"], tm.path, timeout_s=60)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_blkio_write_iops_limit_is_what_fio_measures(
    throttled_loop_factory: Callable[..., ThrottledMount],
) -> None:
    """100 write IOPS limit: fio randwrite 4k direct qd16 reports 100 +- 15%; lifted, far more."""
    tm = throttled_loop_factory(write_iops=100)
    assert tm.cgroup.limits()["write_iops"] == {tm.mount.devno: 100}
    _prepare_file(tm)

    throttled = job(run_fio(RANDWRITE_4K_QD16, tm.path, timeout_s=60, prefix=tm.cgroup.prefix))
    tm.lift()
    assert tm.cgroup.limits()["write_iops"] == {}
    free = job(run_fio(RANDWRITE_4K_QD16, tm.path, timeout_s=60, prefix=tm.cgroup.prefix))

    assert 85 <= throttled["write"]["iops"] <= 115, throttled["write"]["iops"]
    assert free["write"]["iops"] > 10 * 100, free["write"]["iops"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_blkio_read_iops_and_bandwidth_limits(
    throttled_loop_factory: Callable[..., ThrottledMount],
) -> None:
    """read_iops and write_bps limits bite as well (direct IO)."""
    tm = throttled_loop_factory(read_iops=200, write_bps=2 * 1024 * 1024)
    _prepare_file(tm)
    reads = job(
        run_fio(
            [*RANDWRITE_4K_QD16, "--rw=randread"], tm.path, timeout_s=60, prefix=tm.cgroup.prefix
        )
    )
    seq = job(
        run_fio(
            [*SEQWRITE_64K_QD4],
            tm.path,
            timeout_s=60,
            prefix=tm.cgroup.prefix,
        )
    )
    assert 170 <= reads["read"]["iops"] <= 230, reads["read"]["iops"]
    bw = seq["write"]["bw_bytes"]
    assert 0.85 * 2 * 1024 * 1024 <= bw <= 1.15 * 2 * 1024 * 1024, bw


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_blkio_limit_lifted_partway_through_a_run(
    throttled_loop_factory: Callable[..., ThrottledMount], tmp_path: Path
) -> None:
    """Lifting the limit while fio runs takes effect at once (per-500 ms IOPS log).

    fio's log counts from its own start, which a loaded machine delays by most of a second
    after the process starts; the lift is timed from the group's first serviced write and
    the samples are judged against that, not against a fixed sleep.
    """
    tm = throttled_loop_factory(write_iops=100)
    _prepare_file(tm)
    devno = tm.mount.devno
    writes_before = tm.cgroup.ios_done(devno)
    log_prefix = tmp_path / "iops"
    cmd = [
        "fio",
        "--name=probe",
        f"--directory={tm.path}",
        *RANDWRITE_4K_QD16,
        "--runtime=5",
        f"--write_iops_log={log_prefix}",
        "--log_avg_msec=500",
        "--output-format=json",
    ]
    proc = tm.cgroup.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    poll_s = 0.02
    first_write = services.wait_for(
        lambda: tm.cgroup.ios_done(devno) > writes_before and time.monotonic(),
        30,
        "fio's first write",
        interval=poll_s,
    )
    time.sleep(2.0)
    lift_started = time.monotonic()
    tm.lift()
    lift_done = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()

    # In fio's clock (ms since its start, which came before its first write): the lift
    # began no earlier than `earliest` and was done no later than `latest`.
    earliest = (lift_started - first_write) * 1000
    # (+ the polling interval, and 250 ms for the first write and the poller's own wake-up)
    latest = (lift_done - first_write + poll_s) * 1000 + 250
    samples = []  # (msec since start, iops over the 500 ms before it)
    for line in Path(f"{log_prefix}_iops.1.log").read_text().splitlines():
        fields = [x.strip() for x in line.split(",")]
        samples.append((int(fields[0]), int(fields[1])))
    before = [v for t, v in samples if t <= earliest]
    after = [v for t, v in samples if t - 500 >= latest]
    assert len(before) >= 2 and len(after) >= 2, (earliest, latest, samples)
    assert all(70 <= v <= 130 for v in before), (earliest, latest, samples)
    assert min(after) > 1000, (earliest, latest, samples)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_blkio_throttles_the_etcd_fsync_pattern(throttled_loop_mount: ThrottledMount) -> None:
    """Buffered 2300-byte writes + fdatasync are throttled too (fdatasync writes back in the
    caller's cgroup), so a throttled loop device is also a slow etcd disk."""
    tm = throttled_loop_mount
    throttled = _sync_lat(run_fio(ETCD_FSYNC, tm.path, timeout_s=60, prefix=tm.cgroup.prefix))
    tm.lift()
    free = _sync_lat(run_fio(ETCD_FSYNC, tm.path, timeout_s=60, prefix=tm.cgroup.prefix))
    # At 100 IOPS every fdatasync waits for at least one throttled write (>= ~10 ms mean).
    assert throttled["mean"] >= 8 * MS, throttled
    # Unthrottled it is clearly faster. A factor of 2, not more: on a loaded 2-core machine
    # an unthrottled loop-device fdatasync was seen at 3.4 ms mean (vs 12.5 ms throttled).
    assert free["mean"] < throttled["mean"] / 2, (free["mean"], throttled["mean"])


@pytest.mark.timeout(120)
def test_loop_mount_and_cgroup_clean_up_when_the_body_raises(tmp_path: Path) -> None:
    """Unmount, detach, delete the image and remove the cgroup, also after an exception,
    also with a process still running inside the cgroup."""
    if reason := fx.loop_unavailable() or throttle.blkio_available():
        pytest.skip(reason)
    seen: dict[str, object] = {}
    with (
        pytest.raises(RuntimeError, match="boom"),
        throttle.throttled_loop_mount(
            tmp_path / "mnt", 64 * 1024 * 1024, image_dir=tmp_path, write_iops=50
        ) as tm,
    ):
        seen.update(device=tm.mount.device, image=tm.mount.image, cg=tm.cgroup.path)
        sleeper = tm.cgroup.popen(["sleep", "300"])
        deadline = time.monotonic() + 5
        while sleeper.pid not in tm.cgroup.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sleeper.pid in tm.cgroup.pids()
        raise RuntimeError("boom")
    assert sleeper.poll() is not None
    assert not Path(str(seen["cg"])).exists()
    assert throttle.loop_backing_file(str(seen["device"])) != str(seen["image"])
    assert not Path(str(seen["image"])).exists()
    assert not throttle._mounted_at(tmp_path / "mnt")


@pytest.mark.timeout(60)
def test_loop_mount_factory_gives_a_writable_ext4(
    loop_mount_factory: Callable[..., throttle.LoopMount],
) -> None:
    """A plain (unthrottled) loop mount: ext4, the requested size, its own device number."""
    lm = loop_mount_factory(32 * 1024 * 1024)
    assert lm.major == 7
    sv = os.statvfs(lm.mountpoint)
    assert 20 * 1024 * 1024 < sv.f_blocks * sv.f_frsize <= 32 * 1024 * 1024
    (lm.mountpoint / "x").write_bytes(b"y" * 4096)
    assert (lm.mountpoint / "x").stat().st_size == 4096
