"""The probe directory: the only place a probe writes, checked and held for one run.

The rules of the safety design, in the order they apply:
1. The directory must already exist (fioprobe never creates it: a missing directory is an
   unmounted volume or a typo, reported as `no_directory`), must not be a symlink or a
   device, and, when the configuration says so, must be a mount point (a volume that is not
   mounted leaves its empty mount point behind, on the node's own disk).
2. It is opened once, without following a symlink, and everything below happens relative
   to that descriptor: fio gets the path `/proc/<pid>/fd/<n>` of a fresh private
   subdirectory, which names exactly the directory fioprobe created even if someone renames
   or replaces entries under the probe directory meanwhile (and holds no ':', which fio
   would read as a list of directories).
3. One run at a time per directory: a non-blocking flock on the directory itself (`busy`).
4. Free space is checked before anything is written (`no_space`).
5. The private subdirectory is removed in every case, without following symlinks in it,
   iteratively and within bounds (depth and entries: fio leaves a few files, never a
   tree). An entry of that name the probe did not make (another owner, writable by
   others, not a directory) is never entered nor removed: `unsafe_target`, for this target
   alone. On a shared volume any tenant can plant one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fioprobe.errors import FailureReason, ProbeFailure, reason_for_errno
from fioprobe.publish.statefile import STATE_SUBDIR, kind_of, untrusted

__all__ = ["RUN_SUBDIR", "STATE_SUBDIR", "ProbeDirectory", "RunDir", "open_probe_directory"]

RUN_SUBDIR = ".fioprobe-run"
#: fio leaves a flat directory of a few files; a deeper or larger tree is not fio's, and
#: removing it must end (a loop over it is bounded, never a recursion).
MAX_RUN_DIR_DEPTH = 8
MAX_RUN_DIR_ENTRIES = 10_000
#: A FUSE file system renames a file unlinked while still open to `.fuse_hidden*` and
#: removes it only when the last descriptor is released, which happens asynchronously
#: after fio exits: removal retries this often, this far apart, before it leaves them.
FUSE_HIDDEN_RETRIES = 20
FUSE_HIDDEN_PAUSE_SECONDS = 0.05
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Space kept free beyond what the profile writes, so a probe never fills a disk to the brim.
FREE_SPACE_MARGIN_BYTES = 8 * 1024 * 1024


def os_failure(what: str, exc: OSError, default: FailureReason) -> ProbeFailure:
    """A ProbeFailure for an OSError: the errno decides the reason (EROFS is read_only...)."""
    reason = reason_for_errno(exc.errno, default)
    return ProbeFailure(reason, f"{what}: {exc.strerror or exc}")


@dataclass(slots=True)
class ProbeDirectory:
    """An open probe directory (see the module docstring). Use `open_probe_directory`."""

    path: Path
    fd: int

    def check_free_space(self, needed_bytes: int, what: str) -> None:
        needed = needed_bytes + FREE_SPACE_MARGIN_BYTES
        try:
            usage = os.fstatvfs(self.fd)
        except OSError as exc:
            raise os_failure(str(self.path), exc, FailureReason.IO_ERROR) from None
        free = usage.f_bavail * usage.f_frsize
        if free < needed:
            raise ProbeFailure(
                FailureReason.NO_SPACE,
                f"{self.path}: {free} bytes free, {what} needs {needed} ({needed_bytes} for its "
                f"files + {FREE_SPACE_MARGIN_BYTES} margin); nothing was written",
            )

    @contextmanager
    def locked(self) -> Iterator[None]:
        """flock on the directory itself: no lock file is left behind in the probe directory."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ProbeFailure(
                FailureReason.BUSY, f"{self.path}: another probe is running in this directory"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    @contextmanager
    def private_run_dir(self) -> Iterator[RunDir]:
        """A fresh subdirectory for fio's files, removed afterwards whatever happens."""
        self.remove_run_dir()  # left over by a run that was SIGKILLed
        where = self.path / RUN_SUBDIR
        try:
            os.mkdir(RUN_SUBDIR, 0o700, dir_fd=self.fd)
            fd = os.open(RUN_SUBDIR, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise os_failure(f"{where}", exc, FailureReason.FIO_ERROR) from None
        try:
            # A tenant who can rename entries of the probe directory could have put a
            # directory of their own in place of the fresh one between mkdir and open.
            problem = _not_made_by_fioprobe(os.fstat(fd))
            if problem:
                raise ProbeFailure(FailureReason.UNSAFE_TARGET, f"{where}: {problem}")
            yield RunDir(where, fd)
        finally:
            os.close(fd)
            self.remove_run_dir()

    def remove_run_dir(self) -> None:
        """Remove the private run directory if it is there and fioprobe's own (a run that
        was killed leaves it); refuse, touching nothing, one that someone else made."""
        where = self.path / RUN_SUBDIR
        try:
            info = os.lstat(RUN_SUBDIR, dir_fd=self.fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_failure(str(where), exc, FailureReason.IO_ERROR) from None
        problem = _not_made_by_fioprobe(info)
        if problem:  # a symlink, file or tree planted under our name
            raise ProbeFailure(FailureReason.UNSAFE_TARGET, f"{where}: {problem}")
        try:
            # Checked again on what is opened: the name could have been swapped since lstat.
            remove_tree(self.fd, RUN_SUBDIR, where, verify=_not_made_by_fioprobe)
        except OSError as exc:
            raise os_failure(str(where), exc, FailureReason.IO_ERROR) from None


def _not_made_by_fioprobe(info: os.stat_result) -> str | None:
    """Why an entry named like the run directory is not one fioprobe made, or None."""
    problem = untrusted(info) if stat.S_ISDIR(info.st_mode) else f"is {kind_of(info.st_mode)}"
    if problem is None:
        return None
    return f"exists and is not a directory fioprobe made (it {problem}); remove it by hand"


class _TooLarge(Exception):
    pass


def remove_tree(
    parent_fd: int,
    name: str,
    where: Path,
    verify: Callable[[os.stat_result], str | None] | None = None,
) -> None:
    """Remove the directory `name` of `parent_fd` and everything in it.

    A loop with an explicit stack of open descriptors, never a recursion, never following
    a symlink (every entry is opened `O_NOFOLLOW` relative to its directory), at most
    MAX_RUN_DIR_DEPTH levels and MAX_RUN_DIR_ENTRIES entries seen: beyond that it stops
    with `unsafe_target` (what is left is not what fio leaves). `.fuse_hidden*` files of a
    FUSE file system, which go once FUSE releases them, are waited for a moment and then
    left, with their directory, for the next run to remove. Other OSErrors pass through.
    `verify` judges the directory as opened (`fstat`); a problem it names is `unsafe_target`,
    nothing removed.
    """
    seen = 0
    stack: list[tuple[int, str]] = [(os.open(name, _DIR_FLAGS, dir_fd=parent_fd), name)]
    problem = verify(os.fstat(stack[0][0])) if verify else None
    if problem:
        os.close(stack[0][0])
        raise ProbeFailure(FailureReason.UNSAFE_TARGET, f"{where}: {problem}")
    try:
        while stack:
            fd, _ = stack[-1]
            child = None
            for entry in os.listdir(fd):
                seen += 1
                if seen > MAX_RUN_DIR_ENTRIES:
                    raise _TooLarge(f"holds more than {MAX_RUN_DIR_ENTRIES} entries")
                # An entry may go between the listing and its removal: a `.fuse_hidden*`
                # file goes whenever FUSE gets round to releasing it. Gone is removed.
                try:
                    if stat.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode):
                        if len(stack) >= MAX_RUN_DIR_DEPTH:
                            raise _TooLarge(f"is deeper than {MAX_RUN_DIR_DEPTH} levels")
                        child = entry
                        break
                    os.unlink(entry, dir_fd=fd)
                except FileNotFoundError:
                    continue
            if child is not None:
                stack.append((os.open(child, _DIR_FLAGS, dir_fd=fd), child))
                continue
            _, emptied = stack.pop()
            os.close(fd)
            if not _rmdir(stack[-1][0] if stack else parent_fd, emptied):
                return  # only .fuse_hidden* files left: the next run removes them
    except _TooLarge as exc:
        raise ProbeFailure(
            FailureReason.UNSAFE_TARGET,
            f"{where}: {exc}, which fio never leaves; stopped removing it: remove it by hand",
        ) from None
    finally:
        for fd, _ in stack:
            os.close(fd)


def _rmdir(parent_fd: int, name: str) -> bool:
    """rmdir that waits a moment for FUSE to drop its `.fuse_hidden*` files; False when
    only those are left after the wait (the directory stays), True when removed."""
    for attempt in range(FUSE_HIDDEN_RETRIES + 1):
        try:
            os.rmdir(name, dir_fd=parent_fd)
            return True
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            try:
                left = os.listdir(fd)
            finally:
                os.close(fd)
            if not all(entry.startswith(".fuse_hidden") for entry in left):
                raise
            if attempt < FUSE_HIDDEN_RETRIES:
                time.sleep(FUSE_HIDDEN_PAUSE_SECONDS)
    return False


@dataclass(frozen=True, slots=True)
class RunDir:
    """fio's private directory: its path for messages, and the descriptor that pins it."""

    path: Path
    fd: int

    @property
    def pinned_path(self) -> str:
        """A path that resolves to exactly this directory while it is open."""
        return f"/proc/{os.getpid()}/fd/{self.fd}/."

    def write_file(self, name: str, text: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=self.fd)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise os_failure(str(self.path / name), exc, FailureReason.FIO_ERROR) from None

    def read_file(self, name: str) -> bytes | None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_failure(str(self.path / name), exc, FailureReason.IO_ERROR) from None
        with os.fdopen(fd, "rb") as handle:
            return handle.read()


@contextmanager
def open_probe_directory(
    path: Path, *, require_mount_point: bool = False
) -> Iterator[ProbeDirectory]:
    """Open and check the probe directory (rule 1 of the module docstring)."""
    path = Path(os.path.abspath(path))
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ProbeFailure(
            FailureReason.NO_DIRECTORY,
            f"{path}: probe directory does not exist (is the volume mounted?); fioprobe never "
            "creates it",
        ) from None
    except OSError as exc:
        raise os_failure(str(path), exc, FailureReason.NO_DIRECTORY) from None
    if stat.S_ISLNK(info.st_mode):
        raise ProbeFailure(
            FailureReason.UNSAFE_TARGET, f"{path}: is a symlink; give the real directory"
        )
    if stat.S_ISBLK(info.st_mode) or stat.S_ISCHR(info.st_mode):
        raise ProbeFailure(
            FailureReason.UNSAFE_TARGET, f"{path}: is a device; fioprobe never writes to devices"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ProbeFailure(FailureReason.UNSAFE_TARGET, f"{path}: is not a directory")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProbeFailure(
                FailureReason.UNSAFE_TARGET, f"{path}: became a symlink; refusing"
            ) from None
        raise os_failure(str(path), exc, FailureReason.NO_DIRECTORY) from None
    try:
        if require_mount_point and not is_mount_point(path, fd):
            raise ProbeFailure(
                FailureReason.NO_DIRECTORY,
                f"{path}: is not a mount point: the volume is not mounted, and probing the "
                "directory would measure the disk beneath it",
            )
        yield ProbeDirectory(path, fd)
    finally:
        os.close(fd)


def is_mount_point(path: Path, fd: int) -> bool:
    """Whether the open directory is the root of a mount (another device than its parent,
    or listed as a mount point, for bind mounts of the same device)."""
    try:
        own = os.fstat(fd)
        parent = os.stat("..", dir_fd=fd)
    except OSError:
        return False
    if own.st_dev != parent.st_dev or own.st_ino == parent.st_ino:
        return True
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            points = {line.split()[4] for line in handle if len(line.split()) > 4}
    except OSError:
        return False
    return str(path) in {p.replace("\\040", " ") for p in points}
