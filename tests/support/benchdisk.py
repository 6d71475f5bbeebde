"""One disk condition of the fidelity benchmarks, made and undone: a plain directory, the slow
FUSE disk with an fsync delay, or ext4 on a loop device under a blkio throttle.

Both benchmarks that compare a probe with real etcd (bench/fidelity.py for the scheduled
probe, bench/fidelity_stream.py for the continuous stream) need the same filesystems; each
lays out its own directories on the root this gives.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from support import throttle
from support.slowfs import SlowFs, slow_fs

#: tmpfs for the memory-backed conditions (a floor: fdatasync is free there).
MEMORY_DIR = "/dev/shm"


@dataclass
class ConditionDisk:
    """The condition's filesystem root and what puts a process on it."""

    root: Path
    #: argv prefix that runs a command inside the throttle's cgroup (empty when unthrottled).
    prefix: list[str] = field(default_factory=list)
    throttled: throttle.ThrottledMount | None = None
    fs: SlowFs | None = None


@contextlib.contextmanager
def condition_disk(
    workdir: Path,
    *,
    memory: bool,
    fsync_delay_ms: float | None,
    loop_size_bytes: int | None,
) -> Iterator[ConditionDisk]:
    """Make the filesystem: on tmpfs when `memory`, else under `workdir`/disk; behind the slow
    FUSE disk when `fsync_delay_ms` is set, else on a loop device of `loop_size_bytes` when
    that is set (no limit yet: etcd starts unthrottled, its start-up writes are not what is
    measured, and the benchmark applies the limit once etcd answers). Undone on exit, also
    when the body fails."""
    with contextlib.ExitStack() as stack:
        if memory:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=MEMORY_DIR)))
        else:
            base = workdir / "disk"
            base.mkdir(parents=True)
        if fsync_delay_ms is not None:
            (base / "backing").mkdir()
            (base / "mnt").mkdir()
            fs = stack.enter_context(slow_fs(base / "backing", base / "mnt", fsync_delay_ms))
            yield ConditionDisk(fs.mountpoint, fs=fs)
        elif loop_size_bytes is not None:
            throttled = stack.enter_context(
                throttle.throttled_loop_mount(base / "mnt", loop_size_bytes, image_dir=base)
            )
            yield ConditionDisk(throttled.path, throttled.cgroup.prefix, throttled)
        else:
            yield ConditionDisk(base)
