"""`fioprobe continuous`: the real command, real writes and fdatasyncs, scraped over HTTP.

Stalls and hangs come from the slow FUSE disk (`fioprobe.demo.slowdisk`, real latency through the
kernel); "seen" means what the acceptance says: the count of fdatasyncs above the 10 ms
bucket rises, or the in-flight age reaches 1 s. Deadlines carry margins for a loaded
two-core machine; the benchmark (bench/continuous_stalls.py) reports the real figures.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fioprobe
from support import services
from support.continuous import Stream, ops, stream, wait_until
from support.promql import first_value, single_value
from support.slowfs import slow_fs


def slow_count(s: Stream, storageclass: str) -> float:
    """fdatasyncs above 10 ms: the count minus the 10 ms bucket."""
    name = "fioprobe_continuous_sync_latency_seconds"
    return s.value(f"{name}_count", storageclass=storageclass) - s.value(
        f"{name}_bucket", storageclass=storageclass, le="0.01"
    )


# --- a healthy stream ------------------------------------------------------------------------


def test_healthy_stream_writes_serves_and_stops_clean(tmp_path: Path) -> None:
    target = tmp_path / "disk"
    target.mkdir()
    with stream(tmp_path, "--dir", str(target), "--storageclass", "local", "--node", "n1",
                "--etcd-disk", "--interval", "0.2") as s:  # fmt: skip
        wait_until("5 operations", lambda: ops(s) >= 5, 30)
        samples = s.scrape()  # one scrape: its numbers are consistent with each other
        one = {name: value for (name, _), value in samples.items()}
        done = one["fioprobe_continuous_operations_total"]
        assert one["fioprobe_continuous_written_bytes_total"] == done * 2300
        assert one["fioprobe_continuous_sync_latency_seconds_count"] == done
        assert one["fioprobe_continuous_success"] == 1
        assert one["fioprobe_continuous_inflight_seconds"] < 1
        (info,) = [dict(ls) for (n, ls), _ in samples.items() if n == "fioprobe_continuous_info"]
        assert info["etcd_disk"] == "true" and info["node"] == "n1"
        assert info["storageclass"] == "local" and info["major_minor"]
        # The one file, preallocated, in the stream's own directory.
        (wal,) = (target / ".fioprobe-continuous").iterdir()
        assert wal.name == f"wal-{wal.name.split('-')[1]}" and wal.stat().st_size == 4 * 1024 * 1024
        code, took = s.stop()
    assert code == 0
    assert took < 2.0, f"SIGTERM took {took:.2f} s"
    assert list(target.iterdir()) == [], "the stream left files behind"
    assert "Traceback" not in s.stderr()


def test_sigint_and_sighup_stop_it_too(tmp_path: Path) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP):
        target = tmp_path / sig.name
        target.mkdir()
        with stream(tmp_path, "--dir", str(target), "--storageclass", "x", name=sig.name) as s:
            wait_until(
                "an operation", lambda: s.value("fioprobe_continuous_operations_total") >= 1, 30
            )
            s.process.send_signal(sig)
            assert s.process.wait(timeout=5) == 0
        assert list(target.iterdir()) == []


def test_a_writer_that_dies_is_counted_and_started_again(tmp_path: Path) -> None:
    target = tmp_path / "disk"
    target.mkdir()
    with stream(tmp_path, "--dir", str(target), "--storageclass", "x", "--interval", "0.2") as s:
        wait_until("an operation", lambda: ops(s) >= 2, 30)
        (wal,) = (target / ".fioprobe-continuous").iterdir()
        os.kill(int(wal.name.removeprefix("wal-")), signal.SIGKILL)
        errors = "fioprobe_continuous_errors_total"
        wait_until("the death counted", lambda: s.value(errors, reason="interrupted") >= 1, 15)
        before = ops(s)
        wait_until("a new writer writes", lambda: ops(s) > before + 2, 30)
        assert s.value("fioprobe_continuous_success") == 1
        s.stop()
    assert "the writer process: it was killed by signal 9" in s.stderr()
    # The killed writer's file is removed by the next writer (its process is gone), the
    # next writer's own at the stop.
    assert list(target.iterdir()) == []


# --- stalls and hangs on the slow FUSE disk ----------------------------------------------------


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[object]:
    backing, mountpoint = tmp_path / "backing", tmp_path / "slow"
    backing.mkdir()
    mountpoint.mkdir()
    with slow_fs(backing, mountpoint, fsync_delay_ms=0) as fs:
        yield fs


def test_a_five_second_stall_is_seen_by_a_real_prometheus_within_30_s(
    tmp_path: Path, slow: object, prometheus_for: object
) -> None:
    target = slow.mountpoint / "disk"  # type: ignore[attr-defined]
    target.mkdir()
    with stream(tmp_path, "--dir", str(target), "--storageclass", "slow") as s:
        prom = prometheus_for({"continuous": f"127.0.0.1:{s.port}"}, scrape_interval="15s")  # type: ignore[operator]
        name = "fioprobe_continuous_sync_latency_seconds"
        above = (
            f'sum({name}_count{{storageclass="slow"}})'
            f' - sum({name}_bucket{{storageclass="slow", le="0.01"}})'
        )
        wait_until("Prometheus has the stream", lambda: services.query(prom.url, above), 60)
        before = single_value(prom.url, above)
        slow.set_delays(fsync_delay_ms=300)  # type: ignore[attr-defined]
        stall_began = time.monotonic()
        time.sleep(5)
        slow.set_delays(fsync_delay_ms=0)  # type: ignore[attr-defined]

        def seen() -> bool:
            now = first_value(prom.url, above)
            return now is not None and now > before

        wait_until("the stall in Prometheus", seen, 60, step=0.5)
        delay = time.monotonic() - stall_began
        # Seen within 30 s of the stall's start (15 s scrapes): the acceptance, with the
        # test's own polling inside it.
        assert delay <= 30 + 5, f"seen {delay:.1f} s after the stall began"
        assert slow_count(s, "slow") >= 3
        s.stop()


def test_a_hang_in_the_clean_up_after_an_error_shows_in_flight(
    tmp_path: Path, slow: object
) -> None:
    """The disk fails a write (EIO), then hangs: the writer's clean-up (closing and removing
    its file) waits in the kernel. That is IO on the failing disk, in flight while it lasts,
    so the in-flight age grows (it read 0 while the clean-up hung, with no line in the log);
    once it is done the age is 0 again and the error counted."""
    target = slow.mountpoint / "disk"  # type: ignore[attr-defined]
    target.mkdir()
    with stream(tmp_path, "--dir", str(target), "--storageclass", "failing") as s:
        wait_until("it writes", lambda: ops(s, "failing") >= 2, 30)
        slow.set_delays(  # type: ignore[attr-defined]
            fsync_delay_ms=0, fail_errno=errno.EIO, unlink_delay_ms=8000, settle_s=0
        )

        def inflight() -> float:
            return s.value("fioprobe_continuous_inflight_seconds", storageclass="failing")

        wait_until("in-flight age >= 2 s during the clean-up", lambda: inflight() >= 2.0, 15)
        errors = s.value("fioprobe_continuous_errors_total", storageclass="failing")
        assert errors >= 1, s.scrape()
        slow.set_delays(fsync_delay_ms=0, settle_s=0)  # type: ignore[attr-defined]
        wait_until("the clean-up ends", lambda: inflight() == 0.0, 20)
        wait_until("it writes again", lambda: s.value(
            "fioprobe_continuous_success", storageclass="failing") == 1.0, 30)  # fmt: skip
        s.stop()


#: How long the hung fdatasync lasts: long enough to check everything while it hangs and to
#: stop the stream during it, short enough that the abandoned writer ends within the test.
HANG_MS = 20_000


def test_a_hung_fsync_shows_while_it_hangs_and_never_blocks_metrics_or_shutdown(
    tmp_path: Path, slow: object
) -> None:
    target = slow.mountpoint / "disk"  # type: ignore[attr-defined]
    target.mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        "pushgateway: {url: 'http://127.0.0.1:9'}\n"
        "targets:\n"
        f"  - {{name: hung, directory: {target}, profiles: [etcd-fsync]}}\n"
        f"  - {{name: plain, directory: {plain}, profiles: [etcd-fsync]}}\n"
    )
    with stream(tmp_path, "--config", str(config), "--interval", "0.5") as s:
        wait_until("both write", lambda: min(ops(s, "hung"), ops(s, "plain")) >= 2, 30)
        # An fdatasync that the FUSE daemon answers only after HANG_MS: the writer waits in
        # the kernel, uninterruptibly once the request reached the daemon (SIGKILL included).
        slow.set_delays(fsync_delay_ms=HANG_MS, settle_s=0)  # type: ignore[attr-defined]
        hung_at = time.monotonic()

        def inflight() -> float:
            return s.value("fioprobe_continuous_inflight_seconds", storageclass="hung")

        took = wait_until("in-flight age >= 1 s", lambda: inflight() >= 1.0, 15)
        assert took <= 10 + 2.5, f"the hang showed after {took:.1f} s"
        # While it hangs: /metrics answers at once, the other target goes on, stall grows.
        plain_ops = ops(s, "plain")
        stall = s.value("fioprobe_continuous_stall_seconds_total", storageclass="hung")
        time.sleep(2)
        started = time.monotonic()
        s.scrape(timeout=2)
        assert time.monotonic() - started < 1.0
        assert ops(s, "plain") > plain_ops
        assert s.value("fioprobe_continuous_stall_seconds_total", storageclass="hung") > stall + 1
        assert inflight() >= time.monotonic() - hung_at - 3
        # Shutdown does not wait for the stuck writer: it is killed and abandoned.
        code, took = s.stop()
        assert code == 0 and took < 2.0 + 1.0, f"exit {code} after {took:.2f} s"
        log = s.stderr()
        assert "Traceback" not in log
        assert "is stuck in the kernel and is left behind" in log, log
    slow.set_delays(fsync_delay_ms=0)  # type: ignore[attr-defined]
    assert list(plain.iterdir()) == []
    (left,) = (target / ".fioprobe-continuous").iterdir()
    pid = int(left.name.removeprefix("wal-"))

    def gone() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        return state in ("Z", "X")

    wait_until("the abandoned writer ends with its fdatasync", gone, HANG_MS / 1000 + 30)
    # The next start removes what the abandoned writer left, and a dead writer's file.
    stale = target / ".fioprobe-continuous" / "wal-999999999"
    stale.write_bytes(b"x")
    with stream(tmp_path, "--dir", str(target), "--storageclass", "hung", name="again") as s:
        wait_until("the next start writes", lambda: ops(s) >= 1, 30)
        assert not left.exists() and not stale.exists()
        assert len(list((target / ".fioprobe-continuous").iterdir())) == 1
        s.stop()
    assert list(target.iterdir()) == []


def test_a_disk_hung_from_the_start_shows_while_the_stream_sets_up(
    tmp_path: Path, slow: object
) -> None:
    """Setting up (create, preallocate, fdatasync) is IO on the volume too: a disk that is
    already hung when the stream starts shows in flight, not as a quiet stream."""
    target = slow.mountpoint / "disk"  # type: ignore[attr-defined]
    target.mkdir()
    slow.set_delays(fsync_delay_ms=20_000, settle_s=0.3)  # type: ignore[attr-defined]
    with stream(tmp_path, "--dir", str(target), "--storageclass", "hung") as s:
        wait_until(
            "in-flight age >= 1 s during the set-up",
            lambda: s.value("fioprobe_continuous_inflight_seconds") >= 1.0,
            10,
        )
        assert ops(s) == 0
        slow.set_delays(fsync_delay_ms=0, settle_s=0)  # type: ignore[attr-defined]
        wait_until("the first operation after it", lambda: ops(s) >= 1, 30)
        assert s.value("fioprobe_continuous_stall_seconds_total") >= 1.0
        s.stop()
    assert list(target.iterdir()) == []


# --- bad targets -------------------------------------------------------------------------------

#: The stream's fsGroup in the bad-targets test: one of its supplementary groups, not gid 0.
FSGROUP = 4242


def test_bad_targets_get_an_error_metric_and_a_line_each_and_the_good_one_goes_on(
    tmp_path: Path,
) -> None:
    good = tmp_path / "good"
    good.mkdir()
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / ".fioprobe-continuous").symlink_to(real)  # planted by someone else
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / ".fioprobe-continuous").mkdir(mode=0o777)
    os.chmod(loose / ".fioprobe-continuous", 0o777)  # writable by anyone: not its own
    # Group-writable: the kubelet does that for the pod's fsGroup (one of the stream's own
    # groups, FSGROUP here), which is fine; another group's write access is not, nor group 0's
    # (every container's primary group unless it sets runAsGroup), though it is this
    # process's own primary group.
    fsgroup = tmp_path / "fsgroup"
    (fsgroup / ".fioprobe-continuous").mkdir(parents=True)
    os.chown(fsgroup / ".fioprobe-continuous", os.geteuid(), FSGROUP)
    os.chmod(fsgroup / ".fioprobe-continuous", 0o2770)
    root_group = tmp_path / "root-group"
    (root_group / ".fioprobe-continuous").mkdir(parents=True)
    os.chown(root_group / ".fioprobe-continuous", os.geteuid(), 0)
    os.chmod(root_group / ".fioprobe-continuous", 0o2770)
    foreign = tmp_path / "foreign-group"
    (foreign / ".fioprobe-continuous").mkdir(parents=True)
    os.chown(foreign / ".fioprobe-continuous", os.geteuid(), 54321)
    os.chmod(foreign / ".fioprobe-continuous", 0o770)
    config = tmp_path / "config.yaml"
    rows = {
        "good": good,
        "fsgroup": fsgroup,
        "foreign-group": foreign,
        "root-group": root_group,
        "missing": tmp_path / "missing",
        "symlinked": link,
        "not-a-dir": a_file,
        "planted": taken,
        "loose": loose,
    }
    config.write_text(
        "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets:\n"
        + "".join(
            f"  - {{name: {n}, directory: {d}, profiles: [etcd-fsync]}}\n" for n, d in rows.items()
        )
    )
    expected = {
        "missing": "no_directory",
        "symlinked": "unsafe_target",
        "not-a-dir": "unsafe_target",
        "planted": "unsafe_target",
        "loose": "unsafe_target",
        "foreign-group": "unsafe_target",
        "root-group": "unsafe_target",
    }
    with stream(
        tmp_path, "--config", str(config), "--interval", "0.2", extra_groups=[FSGROUP]
    ) as s:

        def all_reported() -> bool:
            return all(
                s.value("fioprobe_continuous_errors_total", storageclass=n, reason=r) >= 1
                for n, r in expected.items()
            )

        wait_until("every bad target's error", all_reported, 30)
        good_ops = ops(s, "good")
        wait_until("the good target goes on", lambda: ops(s, "good") > good_ops + 3, 30)
        for name, reason in expected.items():
            assert s.value("fioprobe_continuous_success", storageclass=name) == 0
            assert s.value("fioprobe_continuous_operations_total", storageclass=name) == 0
            # How long it has failed, and why: what FioProbeContinuousFailing reads.
            failing = "fioprobe_continuous_failing_seconds"
            assert s.value(failing, storageclass=name, reason=reason) > 0
        assert s.value("fioprobe_continuous_success", storageclass="good") == 1
        assert s.value("fioprobe_continuous_failing_seconds", storageclass="good") == 0
        assert ops(s, "fsgroup") >= 1
        code, _ = s.stop()
    assert code == 0
    log = s.stderr()
    assert "Traceback" not in log
    for name, reason in expected.items():
        lines = [line for line in log.splitlines() if f"continuous: {name}: {reason}:" in line]
        assert len(lines) == 1, (name, reason, log)  # a line per change, not per retry
    # A symlink says so, planted or given, and a file is no directory.
    said = {name: next(line for line in log.splitlines() if f"continuous: {name}: " in line)
            for name in ("symlinked", "planted", "not-a-dir")}  # fmt: skip
    assert ": is a symlink; refusing" in said["symlinked"], said
    assert ".fioprobe-continuous: is a symlink; refusing" in said["planted"], said
    assert ": is not a directory; refusing" in said["not-a-dir"], said
    # Nothing was written where the stream does not own the place.
    assert list(real.iterdir()) == []
    assert list((loose / ".fioprobe-continuous").iterdir()) == []
    assert list((foreign / ".fioprobe-continuous").iterdir()) == []
    assert list((root_group / ".fioprobe-continuous").iterdir()) == []


def test_an_unwritable_directory_is_an_error_with_its_own_words(tmp_path: Path) -> None:
    """A directory the stream may not write in (immutable here: EPERM even for root)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    subprocess.run(["chattr", "+i", str(locked)], check=True, timeout=30)
    try:
        with stream(tmp_path, "--dir", str(locked), "--storageclass", "locked") as s:
            wait_until(
                "the io_error",
                lambda: s.value("fioprobe_continuous_errors_total", reason="io_error") >= 1,
                30,
            )
            assert s.value("fioprobe_continuous_success") == 0
            s.stop()
        log = s.stderr()
        assert "locked: io_error:" in log and "Operation not permitted" in log, log
        assert "Traceback" not in log
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=False, timeout=30)
    assert list(locked.iterdir()) == []


def test_read_only_and_full_filesystems(tmp_path: Path) -> None:
    """A real read-only mount and a real full one (tmpfs, root only, as in CI)."""
    if os.geteuid() != 0:
        pytest.fail("needs root to mount tmpfs (CI runs as root)")
    ro, full = tmp_path / "ro", tmp_path / "full"
    ro.mkdir()
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16m", "tmpfs", str(ro)], check=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(full)], check=True)
        try:
            config = tmp_path / "config.yaml"
            config.write_text(
                "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets:\n"
                f"  - {{name: ro, directory: {ro}, profiles: [etcd-fsync]}}\n"
                f"  - {{name: full, directory: {full}, profiles: [etcd-fsync]}}\n"
            )
            with stream(tmp_path, "--config", str(config), "--interval", "0.2") as s:
                errors = "fioprobe_continuous_errors_total"
                wait_until("read_only and no_space", lambda: (
                    s.value(errors, storageclass="ro", reason="read_only") >= 1
                    and s.value(errors, storageclass="full", reason="no_space") >= 1
                ), 30)  # fmt: skip
                s.stop()
            assert "Traceback" not in s.stderr()
            assert [p.name for p in full.iterdir()] == []
        finally:
            subprocess.run(["umount", str(full)], check=True)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


# --- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0.01"], "argument --interval: must be from 0.1 to 3600 seconds: '0.01'"),
        (["--interval", "1e300"], "argument --interval: must be from 0.1 to 3600 seconds: '1e300'"),
        (["--interval", "nan"], "argument --interval: must be from 0.1 to 3600 seconds: 'nan'"),
        (["--interval", "x"], "argument --interval: not a number of seconds: 'x'"),
        (["--write-size", "10"], "argument --write-size: must be a whole number of bytes from 512"),
        (
            ["--file-size", "2Ti"],
            "argument --file-size: must be a whole number of bytes from 65536",
        ),
        (["--file-size", "lots"], "argument --file-size: not a size in bytes"),
        (["--stall-threshold", "0"], "argument --stall-threshold: must be from 0.0001 to 60"),
        (["--listen", "9436"], "argument --listen: must be [HOST]:PORT"),
        (["--listen", ":99999"], "argument --listen: must be [HOST]:PORT"),
        (
            [
                "--write-size",
                "8192",
                "--file-size",
                "64Ki",
                "--dir",
                "/nonexistent",
                "--storageclass",
                "x",
                "--file-size",
                "65536",
                "--write-size",
                "1Mi",
            ],
            "--file-size (65536) must hold at least one write",
        ),
        ([], "continuous: give --config, or --dir and --storageclass"),
        (["--dir", "/tmp"], "continuous: give --config, or --dir and --storageclass"),
    ],
)
def test_bad_options_are_refused_with_one_line(args: list[str], message: str) -> None:
    result = fioprobe("continuous", "--listen", "127.0.0.1:0", *args, timeout=30)
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_node_local_target_needs_a_node(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "pushgateway: {url: 'http://127.0.0.1:9'}\ntargets:\n"
        f"  - {{name: etcd-disk, directory: {tmp_path}, node_local: true,"
        " profiles: [etcd-fsync]}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    result = subprocess.run(
        [sys.executable, "-m", "fioprobe", "continuous", "--config", str(config)],
        capture_output=True, timeout=30, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "target etcd-disk is node-local: give --node or NODE_NAME" in result.stderr.decode()
