"""scripts/run-tests.sh, what `make test` and CI run: both lanes run and both verdicts count, a
lane that collects nothing fails the run, and a stop tears the tests' fixtures down. Each case
runs the real script on a few small test files (FIOPROBE_TEST_CPU_LANE, FIOPROBE_TEST_PATHS)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from support import procs
from support.paths import REPO
from support.slowfs import mount_fstype

SCRIPT = REPO / "scripts" / "run-tests.sh"
#: Quick files, one per lane.
CPU_FILE = "tests/mixin/test_mixin_metric_names.py"
WAITING_FILE = "tests/cli/test_error_types.py"


def env(cpu_lane: str, waiting: str) -> dict[str, str]:
    return {
        **os.environ,
        "FIOPROBE_TEST_CPU_LANE": cpu_lane,
        "FIOPROBE_TEST_PATHS": waiting,
        "FIOPROBE_TEST_WORKERS": "1",
    }


def run(cpu_lane: str, waiting: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)], env=env(cpu_lane, waiting), capture_output=True, text=True,
        timeout=600, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_both_lanes_run_and_report() -> None:
    done = run(CPU_FILE, WAITING_FILE)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "waiting lane exit 0, CPU lane exit 0" in out
    # Each lane's own session line: the CPU lane's file ran there, not in the waiting lane.
    assert out.count(" passed in ") == 2, out


def test_a_lane_that_collects_nothing_fails_the_run() -> None:
    """pytest's exit 5 in either lane is a failure, whatever the other lane says."""
    for cpu_lane, waiting in (("tests/support/paths.py", WAITING_FILE),
                              (CPU_FILE, "tests/support/paths.py")):  # fmt: skip
        done = run(cpu_lane, waiting)
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert "pytest collected no tests" in out, out


def test_a_stop_tears_the_fixtures_down(tmp_path: Path) -> None:
    """SIGTERM to the script while a test holds a hung FUSE disk: the script exits 143 and
    pytest's teardown unmounted the disk and stopped its process."""
    log = tmp_path / "run.log"
    with log.open("w") as out:
        script = subprocess.Popen(
            ["bash", str(SCRIPT)],
            env=env(CPU_FILE, "tests/probe/test_hung_volume.py::"
                    "test_probe_on_a_hung_volume_pushes_timeout_and_the_next_run_does_not_pile_up"),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        mounts: list[str] = []
        while not mounts and time.monotonic() < deadline:
            mounts = [
                line.split()[1]
                for line in Path("/proc/self/mounts").read_text().splitlines()
                if "test_probe_on_a_hung_volume" in line and line.split()[2].startswith("fuse")
            ]
            time.sleep(0.5)
        assert mounts, log.read_text()
        time.sleep(2)  # the probe is writing to the hung disk now
        script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=200) == 143, log.read_text()
    finally:
        if script.poll() is None:
            script.kill()
            script.wait(timeout=30)
    assert all(mount_fstype(point) is None for point in mounts), log.read_text()
    left = [
        pid
        for pid, argv in procs.command_lines()
        if any(point.encode() in arg for point in mounts for arg in argv)
    ]
    assert not left, left
    text = log.read_text()
    assert "KeyboardInterrupt" in text, text
