"""Removing the private run directory: bounded, never recursive, and patient with FUSE.

On a FUSE file system a file unlinked while still open becomes `.fuse_hidden*` until the
last descriptor is released, which happens asynchronously after fio exits: the removal
must not turn that into an `io_error` ("Directory not empty") for a run that succeeded. A
tree larger than fio ever leaves ends the removal with `unsafe_target`, never a
RecursionError. The real FUSE disk of the tests (fioprobe.demo.slowdisk), no delays.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fioprobe.errors import FailureReason, ProbeFailure
from fioprobe.probe import directory as probedir
from fioprobe.probe.directory import RUN_SUBDIR, open_probe_directory
from support import fixtures as fx
from support.slowfs import SlowFs

slow_dir_factory = fx.slow_dir_factory


def _open_file_in_run_dir(run_dir_fd: int) -> int:
    """A file of fio's, still open (fio's job gone, FUSE not yet told)."""
    fd = os.open("job.0.0", os.O_RDWR | os.O_CREAT, 0o600, dir_fd=run_dir_fd)
    os.write(fd, b"x" * 4096)
    return fd


def test_a_file_still_open_on_fuse_is_waited_for(
    slow_dir_factory: Callable[..., SlowFs],
) -> None:
    slow = slow_dir_factory(0)
    with open_probe_directory(slow.mountpoint) as directory:
        with directory.private_run_dir() as run_dir:
            held = _open_file_in_run_dir(run_dir.fd)
            # Released a moment after the removal starts, as FUSE does after fio exits.
            threading.Timer(0.3, os.close, (held,)).start()
        assert not (slow.mountpoint / RUN_SUBDIR).exists()
    assert list(slow.mountpoint.iterdir()) == []


def test_a_file_held_open_longer_is_left_for_the_next_run(
    slow_dir_factory: Callable[..., SlowFs],
) -> None:
    slow = slow_dir_factory(0)
    with open_probe_directory(slow.mountpoint) as directory:
        with directory.private_run_dir() as run_dir:  # no io_error on the way out
            held = _open_file_in_run_dir(run_dir.fd)
        left = sorted(p.name for p in (slow.mountpoint / RUN_SUBDIR).iterdir())
        assert len(left) == 1 and left[0].startswith(".fuse_hidden"), left
        os.close(held)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any((slow.mountpoint / RUN_SUBDIR).iterdir()):
            time.sleep(0.05)
        # The next run starts by removing it.
        with directory.private_run_dir():
            pass
    assert list(slow.mountpoint.iterdir()) == []


def test_more_entries_than_fio_leaves_stop_the_removal(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN_SUBDIR
    run_dir.mkdir(mode=0o700)
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for index in range(10_001):
            os.close(os.open(f"f{index}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    with open_probe_directory(tmp_path) as directory, pytest.raises(ProbeFailure) as caught:
        directory.remove_run_dir()
    assert caught.value.reason == FailureReason.UNSAFE_TARGET
    assert "holds more than 10000 entries" in str(caught.value)


def test_the_directory_is_judged_as_opened_not_as_named(tmp_path: Path) -> None:
    """remove_tree judges the directory it opened (fstat), not what a name showed a moment
    earlier: one another user swapped in under the run directory's name is refused whole."""
    swapped = tmp_path / ".fioprobe-run"
    swapped.mkdir(mode=0o700)
    (swapped / "keep").write_text("a tenant's file")
    os.chown(swapped, 65534, 65534)
    parent = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ProbeFailure) as caught:
            probedir.remove_tree(
                parent, ".fioprobe-run", swapped, verify=probedir._not_made_by_fioprobe
            )
    finally:
        os.close(parent)
    assert caught.value.reason == FailureReason.UNSAFE_TARGET
    assert (swapped / "keep").read_text() == "a tenant's file"


def test_an_entry_that_goes_between_listing_and_removal_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `.fuse_hidden*` file goes when FUSE gets round to releasing it, which on a loaded
    node can fall between remove_tree's listing and its unlink: the entry is gone, which is
    what removing it meant, not an error. Here the file goes just before the real unlink."""
    run = tmp_path / "run"
    run.mkdir()
    (run / ".fuse_hidden0001").write_bytes(b"x")
    (run / "fio-file").write_bytes(b"x")
    real_unlink = os.unlink

    def released_just_before(name: str, *, dir_fd: int | None = None) -> None:
        if name.startswith(".fuse_hidden"):
            real_unlink(name, dir_fd=dir_fd)  # FUSE's release, at the worst moment
        real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(probedir.os, "unlink", released_just_before)
    parent = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        probedir.remove_tree(parent, "run", run)
    finally:
        os.close(parent)
    assert not run.exists()
