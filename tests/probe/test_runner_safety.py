"""The runner's safety rules, each against real fio and a real Pushgateway.

A probe writes only inside its own directory, never to a device; it refuses what is unsafe
with a clear reason, stops fio on timeout and signals, and leaves no file behind.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge, wait_for
from fioprobe.errors import ProbeFailure
from fioprobe.fio.execute import check_fio_version
from support import fixtures as fx
from support import services

slow_dir_factory = fx.slow_dir_factory
loop_mount_factory = fx.loop_mount_factory


def probe(gateway: services.Service, directory: Path, profile: str = "etcd-fsync",
          *extra: str, env: dict[str, str] | None = None):  # fmt: skip
    return fioprobe("probe", "--profile", profile, "--dir", str(directory), "--gateway",
                    gateway.url, "--storageclass", "test", "--quiet", *extra, env=env)  # fmt: skip


def failure_reason(gateway: services.Service, profile: str = "etcd-fsync") -> str:
    group = gateway_group(gateway, storageclass="test", profile=profile)
    assert group is not None, "the failure was not pushed"
    assert gauge(group, "fioprobe_success") == 0
    (reason,) = group["fioprobe_failure_reason_info"]
    return reason["labels"]["reason"]


def fio_processes_in(directory: Path) -> list[int]:
    """PIDs of live fio processes working in `directory`: an open file or the command line
    (fioprobe hands fio a /proc/<pid>/fd path, so the open files are what names it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if Path(argv[0].decode()).name != "fio" or state == b"Z":
                continue
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(str(directory).encode() in arg for arg in argv) or any(
            link.startswith(str(directory)) for link in links
        ):
            pids.append(int(entry.name))
    return pids


def probe_files(directory: Path) -> list[Path]:
    """What a probe left in `directory`, besides its cumulative state."""
    return [p for p in directory.iterdir() if p.name != ".fioprobe-state"]


def test_successful_probe_leaves_no_file(tmp_path: Path, state_dir: Path, pushgateway) -> None:
    target = tmp_path / "probe"
    target.mkdir()
    result = probe(pushgateway, target)
    assert result.returncode == 0, result.stderr.decode()
    assert probe_files(target) == []
    group = gateway_group(pushgateway, storageclass="test", profile="etcd-fsync")
    assert gauge(group, "fioprobe_success") == 1
    assert "fioprobe_failure_reason_info" not in group


def test_symlinked_directory_is_refused(tmp_path: Path, state_dir: Path, pushgateway) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    link = tmp_path / "probe"
    link.symlink_to(real)
    result = probe(pushgateway, link)
    assert result.returncode == 2
    assert "is a symlink" in result.stderr.decode()
    assert failure_reason(pushgateway) == "unsafe_target"
    assert list(real.iterdir()) == []


def test_planted_symlink_inside_the_directory_is_refused(
    tmp_path: Path, state_dir: Path, pushgateway
) -> None:
    """A symlink where fio's private run directory goes must not lead fio out of it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "probe"
    target.mkdir()
    (target / ".fioprobe-run").symlink_to(outside)
    result = probe(pushgateway, target)
    assert result.returncode == 2
    assert "exists and is not a directory fioprobe made" in result.stderr.decode()
    assert failure_reason(pushgateway) == "unsafe_target"
    assert list(outside.iterdir()) == []


def test_block_device_is_refused(state_dir: Path, pushgateway) -> None:
    device = Path("/dev/loop7")
    assert device.is_block_device()
    before = os.stat(device).st_mtime
    result = probe(pushgateway, device)
    assert result.returncode == 2
    assert "is a device; fioprobe never writes to devices" in result.stderr.decode()
    assert failure_reason(pushgateway) == "unsafe_target"
    assert os.stat(device).st_mtime == before


def test_profile_naming_a_file_is_refused(tmp_path: Path, state_dir: Path, pushgateway) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    victim = tmp_path / "victim"
    (jobs / "evil.fio").write_text(
        "# fioprobe-budget-bytes: 1048576\n# fioprobe-budget-seconds: 5\n"
        f"[evil]\nrw=write\nsize=1m\nruntime=1\nfilename={victim}\n"
    )
    target = tmp_path / "probe"
    target.mkdir()
    result = probe(pushgateway, target, "evil", "--jobs-dir", str(jobs))
    assert result.returncode == 2
    assert "option 'filename' is not allowed" in result.stderr.decode()
    assert failure_reason(pushgateway, "evil") == "unsafe_target"
    assert not victim.exists() and probe_files(target) == []


def test_no_space_is_refused_before_writing(
    state_dir: Path, pushgateway, loop_mount_factory
) -> None:
    """A 20 MiB filesystem and a profile laying out a 64 MiB file: no_space, and nothing
    written but the probe's few-KiB state (which records the failure)."""
    small = loop_mount_factory(size_bytes=20 * 1024 * 1024)
    before = sorted(p.name for p in small.mountpoint.iterdir())
    usage_before = os.statvfs(small.mountpoint).f_bfree
    result = probe(pushgateway, small.mountpoint, "seqwrite-bw")
    assert result.returncode == 1
    assert "nothing was written" in result.stderr.decode()
    assert failure_reason(pushgateway, "seqwrite-bw") == "no_space"
    assert sorted(p.name for p in probe_files(small.mountpoint)) == before
    assert usage_before - os.statvfs(small.mountpoint).f_bfree <= 16  # blocks of the state


def test_second_run_on_a_locked_directory_refuses(
    tmp_path: Path, state_dir: Path, pushgateway
) -> None:
    target = tmp_path / "probe"
    target.mkdir()
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        result = probe(pushgateway, target)
    finally:
        os.close(fd)
    assert result.returncode == 1
    assert "another probe is running in this directory" in result.stderr.decode()
    # The refused run pushes its failure, beside counters it leaves alone (none here); a
    # holder that is alive pushes its own result over it.
    assert failure_reason(pushgateway) == "busy"
    group = gateway_group(pushgateway, storageclass="test", profile="etcd-fsync")
    assert group is not None and "fioprobe_runs_total" not in group


@pytest.mark.slow
def test_timeout_kills_fio_and_cleans_up(state_dir: Path, pushgateway, slow_dir_factory) -> None:
    slow = slow_dir_factory(100)  # 100 ms per fdatasync: the profile would take 15 s
    started = time.monotonic()
    result = probe(pushgateway, slow.mountpoint, "etcd-fsync", "--probe-timeout", "2")
    assert time.monotonic() - started < 15
    assert result.returncode == 1
    assert "fio did not finish within 2s" in result.stderr.decode()
    assert failure_reason(pushgateway) == "timeout"
    assert fio_processes_in(slow.mountpoint) == []
    assert probe_files(slow.mountpoint) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_run_kills_fio_removes_files_pushes_failure(
    sig: signal.Signals, state_dir: Path, pushgateway, slow_dir_factory
) -> None:
    slow = slow_dir_factory(50)
    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "probe", "--profile", "etcd-fsync", "--dir",
         str(slow.mountpoint), "--gateway", pushgateway.url, "--storageclass", "test"],
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: fio_processes_in(slow.mountpoint), timeout=20, what="fio to start")
        wait_for(lambda: any(slow.mountpoint.rglob("etcd-fsync*")), timeout=20,
                 what="fio's file")  # fmt: skip
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + sig
    assert f"interrupted by {sig.name}" in stderr.decode()
    assert fio_processes_in(slow.mountpoint) == []
    assert probe_files(slow.mountpoint) == []
    assert failure_reason(pushgateway) == "interrupted"
    group = gateway_group(pushgateway, storageclass="test", profile="etcd-fsync")
    assert gauge(group, "fioprobe_failures_total") == 1


def test_missing_fio_is_a_clear_failure(tmp_path: Path, state_dir: Path, pushgateway) -> None:
    target = tmp_path / "probe"
    target.mkdir()
    result = probe(pushgateway, target, env={"PATH": str(tmp_path / "empty-bin")})
    assert result.returncode == 1
    assert "fio is not installed" in result.stderr.decode()
    assert failure_reason(pushgateway) == "fio_missing"


@pytest.mark.parametrize(
    ("version", "ok"),
    [("fio-3.33", True), ("fio-3.1", True), ("fio-3.42-6-g219f", True), ("fio-2.17", False),
     ("fio-3.0", False), ("not fio", False)],
)  # fmt: skip
def test_fio_version_check(version: str, ok: bool) -> None:
    if ok:
        check_fio_version("fio", version)
    else:
        with pytest.raises(ProbeFailure, match=r"needs fio 3\.1 or newer"):
            check_fio_version("fio", version)


def test_nul_byte_in_a_configured_path_is_one_line_and_runs_nothing(
    tmp_path: Path, pushgateway
) -> None:
    """No path holds a NUL byte: refused at load, naming the key and the target, instead of
    a ValueError that ended the whole run after the earlier targets."""
    good = tmp_path / "good"
    good.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        f"pushgateway: {{url: '{pushgateway.url}'}}\ntargets:\n"
        f"  - {{name: good, directory: '{good}', profiles: [etcd-fsync]}}\n"
        f'  - {{name: bad, directory: "{good}\\0x", profiles: [etcd-fsync]}}\n'
    )
    result = fioprobe("run", "--config", str(config))
    assert result.returncode == 2
    (line,) = result.stderr.decode().splitlines()
    assert f"{config}: targets[1].directory: '" in line, line
    assert line.endswith("x00x' holds a NUL byte, which no path can (target bad)"), line
    assert list(good.iterdir()) == []
    assert gateway_group(pushgateway, storageclass="good", profile="etcd-fsync") is None


def test_state_dir_on_the_probe_volume_is_refused(tmp_path: Path, pushgateway) -> None:
    target = tmp_path / "probe"
    target.mkdir()
    result = probe(pushgateway, target, "etcd-fsync", "--state-dir", str(target / "state"))
    assert result.returncode == 2
    (line,) = result.stderr.decode().splitlines()
    assert "must be beside --dir" in line and "tenants of the probe volume" in line, line
    assert list(target.iterdir()) == []
    assert gateway_group(pushgateway, storageclass="test", profile="etcd-fsync") is None


def _deep_tree(root: Path, depth: int) -> None:
    """`depth` nested directories under `root`, made without ever naming a long path."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.fixture
def deep_probe_dir(tmp_path: Path) -> Iterator[Path]:
    """A probe directory for deep trees, removed by rm whatever the test does: pytest's own
    cleanup of old temporary directories recurses, and would fail on 1,200 levels."""
    target = tmp_path / "probe"
    target.mkdir()
    yield target
    subprocess.run(["rm", "-rf", str(target)], check=False, timeout=120)


def test_a_deep_run_directory_of_the_probes_own_stops_removal_within_bounds(
    deep_probe_dir: Path, pushgateway
) -> None:
    """Even a `.fioprobe-run` of the probe's own user (a tenant sharing the uid, a restore)
    is removed by a bounded loop: 1,200 levels end in unsafe_target, no RecursionError, and
    the probe touches nothing beyond its bound."""
    target = deep_probe_dir
    run_dir = target / ".fioprobe-run"
    run_dir.mkdir(mode=0o700)
    _deep_tree(run_dir, 1200)
    started = time.monotonic()
    result = probe(pushgateway, target)
    assert time.monotonic() - started < 60
    assert result.returncode == 2, result.stderr.decode()
    (line,) = result.stderr.decode().splitlines()
    assert "FAILED (unsafe_target)" in line and "deeper than 8 levels" in line, line
    assert failure_reason(pushgateway) == "unsafe_target"


def test_leftover_run_directory_of_the_probes_own_is_removed(tmp_path: Path, pushgateway) -> None:
    """What a SIGKILLed run left (a few files, a level or two) goes before the next run."""
    target = tmp_path / "probe"
    target.mkdir()
    run_dir = target / ".fioprobe-run"
    (run_dir / "sub").mkdir(parents=True, mode=0o700)
    run_dir.chmod(0o700)
    for name in ("job.0.0", "sub/x", "job.fio"):
        (run_dir / name).write_bytes(b"x" * 4096)
    (run_dir / "link").symlink_to(tmp_path)
    result = probe(pushgateway, target)
    assert result.returncode == 0, result.stderr.decode()
    assert probe_files(target) == []
    assert tmp_path.exists()
