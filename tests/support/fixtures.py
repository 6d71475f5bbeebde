"""pytest fixtures over the fault tools, for any test or benchmark to import.

Why a plain module and not conftest.py: tests/conftest.py belongs to the suite as a whole;
a test module opts in with ``from support.fixtures import slow_dir_15ms  # noqa: F401``
(pytest finds fixtures in the module namespace). Each factory cleans up everything it made
at teardown, also when the test failed, and skips only when the kernel facility is missing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support import throttle
from support.slowfs import SlowFs, slow_fs
from support.throttle import (
    BlkioCgroup,
    LoopMount,
    ThrottledMount,
    blkio_available,
    blkio_cgroup,
    loop_mount,
)

DEFAULT_LOOP_SIZE = 256 * 1024 * 1024


def fuse_unavailable() -> str | None:
    """None if FUSE mounts can be made here, else why not (a reason to skip)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel/container)"
    if os.geteuid() != 0:
        return "mounting the slow FUSE filesystem with allow_other needs root"
    return None


def loop_unavailable() -> str | None:
    """None if loop devices can be set up here, else why not (a reason to skip)."""
    if not (os.path.exists("/dev/loop-control") or os.path.exists("/dev/loop0")):
        return "no loop device support (/dev/loop-control and /dev/loop0 missing)"
    if os.geteuid() != 0:
        return "loop devices and mounts need root"
    return None


def _skip_if(reason: str | None) -> None:
    if reason:
        pytest.skip(reason)


@pytest.fixture
def slow_dir_factory(tmp_path: Path) -> Iterator[Callable[..., SlowFs]]:
    """Factory ``make(fsync_delay_ms, write_delay_ms=0.0) -> SlowFs``.

    Each call mounts a fresh slow view of a fresh backing directory under tmp_path; fio or
    etcd should use ``handle.mountpoint``. Delays can be changed later with
    ``handle.set_delays(...)``.
    """
    _skip_if(fuse_unavailable())
    with contextlib.ExitStack() as stack:
        count = 0

        def make(fsync_delay_ms: float, write_delay_ms: float = 0.0) -> SlowFs:
            nonlocal count
            count += 1
            base = tmp_path / f"slowfs-{count}"
            (base / "backing").mkdir(parents=True)
            (base / "mnt").mkdir()
            return stack.enter_context(
                slow_fs(base / "backing", base / "mnt", fsync_delay_ms, write_delay_ms)
            )

        yield make


@pytest.fixture
def slow_dir_15ms(slow_dir_factory: Callable[..., SlowFs]) -> SlowFs:
    """A mounted slow filesystem whose fsync/fdatasync take at least 15 ms."""
    return slow_dir_factory(15)


@pytest.fixture
def loop_mount_factory(tmp_path: Path) -> Iterator[Callable[..., LoopMount]]:
    """Factory ``make(size_bytes=256 MiB) -> LoopMount`` (ext4 on a loop device)."""
    _skip_if(loop_unavailable())
    with contextlib.ExitStack() as stack:
        count = 0

        def make(size_bytes: int = DEFAULT_LOOP_SIZE) -> LoopMount:
            nonlocal count
            count += 1
            return stack.enter_context(
                loop_mount(tmp_path / f"loop-{count}", size_bytes, image_dir=tmp_path)
            )

        yield make


@pytest.fixture
def blkio_cgroup_factory() -> Iterator[Callable[[], BlkioCgroup]]:
    """Factory ``make() -> BlkioCgroup`` (removed at teardown with its processes)."""
    _skip_if(blkio_available())
    with contextlib.ExitStack() as stack:
        yield lambda: stack.enter_context(blkio_cgroup())


@pytest.fixture
def throttled_loop_factory(tmp_path: Path) -> Iterator[Callable[..., ThrottledMount]]:
    """Factory ``make(size_bytes=256 MiB, read_iops=, write_iops=, read_bps=, write_bps=)``.

    Returns a :class:`ThrottledMount`: run fio in ``tm.path`` with ``tm.cgroup.wrap(cmd)``
    (or ``tm.cgroup.popen``/``run``) so the limits apply; change them with
    ``tm.set_limits(...)`` or ``tm.lift()`` while it runs.
    """
    _skip_if(loop_unavailable())
    _skip_if(blkio_available())
    with contextlib.ExitStack() as stack:
        count = 0

        def make(size_bytes: int = DEFAULT_LOOP_SIZE, **limits: int | None) -> ThrottledMount:
            nonlocal count
            count += 1
            return stack.enter_context(
                throttle.throttled_loop_mount(
                    tmp_path / f"throttled-{count}", size_bytes, image_dir=tmp_path, **limits
                )
            )

        yield make


@pytest.fixture
def throttled_loop_mount(
    throttled_loop_factory: Callable[..., ThrottledMount],
) -> ThrottledMount:
    """ext4 on a loop device whose reads and writes are each limited to 100 IOPS."""
    return throttled_loop_factory(read_iops=100, write_iops=100)
