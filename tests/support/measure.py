"""Measure what the fault tools do on this machine; the numbers in README.md come from here.

Why a script: whether a kernel throttles a given IO path, or how much FUSE costs, differs
between machines and kernels. Run it (as root, ~1 minute) to re-check before trusting a
benchmark built on these tools::

    PYTHONPATH=tests .venv/bin/python -m support.measure
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from support.fiorun import job, run_fio
from support.slowfs import slow_fs
from support.throttle import throttled_loop_mount

ETCD = ["--ioengine=sync", "--rw=write", "--bs=2300", "--fdatasync=1", "--size=4m", "--runtime=3"]
RANDW = ["--ioengine=libaio", "--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=16"]
RANDW += ["--size=64m", "--runtime=3", "--time_based"]
BUFFERED = ["--ioengine=psync", "--rw=randwrite", "--bs=4k", "--size=64m", "--runtime=3"]
BUFFERED += ["--time_based", "--end_fsync=0"]


def sync_ms(res: dict[str, Any]) -> str:
    """'mean/p50/p99 ms' of fio's sync latency."""
    lat = job(res)["sync"]["lat_ns"]
    pct = lat["percentile"]
    return (
        f"mean {lat['mean'] / 1e6:.2f} ms, p50 {pct['50.000000'] / 1e6:.2f} ms, "
        f"p99 {pct['99.000000'] / 1e6:.2f} ms (n={lat['N']})"
    )


def write_iops(res: dict[str, Any]) -> str:
    """fio's write IOPS."""
    return f"{job(res)['write']['iops']:.0f} write IOPS"


def main() -> None:
    """Print one line per measurement."""
    with tempfile.TemporaryDirectory(prefix="fioprobe-measure-") as tmp:
        base = Path(tmp)
        (base / "b").mkdir()
        (base / "m").mkdir()
        print("plain dir, etcd-fsync:", sync_ms(run_fio(ETCD, base / "b", 60)))
        with slow_fs(base / "b", base / "m", 0) as fs:
            print("slowfs 0 ms, etcd-fsync:", sync_ms(run_fio(ETCD, fs.mountpoint, 60)))
            print(
                "slowfs 0 ms, randwrite direct qd16:", write_iops(run_fio(RANDW, fs.mountpoint, 60))
            )
            fs.set_delays(15)
            print("slowfs 15 ms, etcd-fsync:", sync_ms(run_fio(ETCD, fs.mountpoint, 60)))
        with throttled_loop_mount(base / "loop", image_dir=base) as tm:
            run_fio(["--create_only=1", "--size=64m"], tm.path, 60)
            pre = tm.cgroup.prefix
            print(
                "loop unthrottled, randwrite direct qd16:",
                write_iops(run_fio(RANDW, tm.path, 60, pre)),
            )
            print("loop unthrottled, etcd-fsync:", sync_ms(run_fio(ETCD, tm.path, 60, pre)))
            tm.set_limits(write_iops=100)
            print(
                "loop 100 wIOPS, randwrite direct qd16:",
                write_iops(run_fio(RANDW, tm.path, 60, pre)),
            )
            print("loop 100 wIOPS, etcd-fsync:", sync_ms(run_fio(ETCD, tm.path, 60, pre)))
            print(
                "loop 100 wIOPS, buffered randwrite no sync:",
                write_iops(run_fio(BUFFERED, tm.path, 60, pre)),
            )


if __name__ == "__main__":
    main()
