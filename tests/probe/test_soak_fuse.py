"""Sixty etcd-fsync probes in a row on the FUSE slow disk, with both CPUs kept busy.

Under load the FUSE daemon releases fio's files late (after fio has exited), so the run
directory holds `.fuse_hidden*` files for a moment when it is removed: that must never fail
a run. What must hold: 0 failures in 60 runs, every run counted, and nothing left in the
probe directory at the end.

It takes several minutes (each run writes 4 MiB with an fdatasync held 2 ms after every
2300 bytes), so it runs only with FIOPROBE_SOAK=1: `make soak`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import fioprobe, gateway_group, gauge
from support import services
from support.fixtures import slow_dir_factory
from support.slowfs import SlowFs

__all__ = ["slow_dir_factory"]

pytestmark = [
    pytest.mark.soak,
    pytest.mark.skipif(
        os.environ.get("FIOPROBE_SOAK") != "1", reason="several minutes: run by `make soak`"
    ),
]

RUNS = 60
FSYNC_DELAY_MS = 2
BUSY_LOOPS = 2


@pytest.fixture
def busy_cpus() -> Iterator[list[subprocess.Popen[bytes]]]:
    """One busy loop per CPU, stopped by PID at teardown whatever happens."""
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        for _ in range(BUSY_LOOPS)
    ]
    try:
        yield loops
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait(timeout=30)


@pytest.mark.timeout(1800)
def test_sixty_etcd_fsync_probes_on_a_busy_host(
    tmp_path: Path,
    pushgateway: services.Service,
    slow_dir_factory: Callable[..., SlowFs],
    busy_cpus: list[subprocess.Popen[bytes]],
) -> None:
    disk = slow_dir_factory(FSYNC_DELAY_MS)
    env = {**os.environ, "FIOPROBE_STATE_DIR": str(tmp_path / "state")}
    failures = []
    started = time.monotonic()
    for number in range(1, RUNS + 1):
        result = fioprobe("probe", "--profile", "etcd-fsync", "--dir", str(disk.mountpoint),
                          "--storageclass", "soak", "--gateway", pushgateway.url, "--quiet",
                          env=env, timeout=180)  # fmt: skip
        if result.returncode != 0:
            failures.append(f"run {number}: {result.stderr.decode(errors='replace')}")
    seconds = time.monotonic() - started
    assert all(loop.poll() is None for loop in busy_cpus), "the CPUs were busy throughout"
    assert failures == [], failures
    group = gateway_group(pushgateway, storageclass="soak", profile="etcd-fsync")
    assert group is not None
    assert gauge(group, "fioprobe_runs_total") == RUNS
    assert gauge(group, "fioprobe_failures_total") == 0
    assert os.listdir(disk.mountpoint) == []
    print(f"{RUNS} runs in {seconds:.0f} s")
