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
5. The private subdirectory is removed in every case, without following symlinks in it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import FailureReason, ProbeFailure, reason_for_errno

RUN_SUBDIR = ".fioprobe-run"
STATE_SUBDIR = ".fioprobe-state"
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
        self._remove_run_dir()  # left over by a run that was SIGKILLed
        try:
            os.mkdir(RUN_SUBDIR, 0o700, dir_fd=self.fd)
            fd = os.open(
                RUN_SUBDIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=self.fd,
            )  # fmt: skip
        except OSError as exc:
            raise os_failure(f"{self.path / RUN_SUBDIR}", exc, FailureReason.FIO_ERROR) from None
        try:
            yield RunDir(self.path / RUN_SUBDIR, fd)
        finally:
            os.close(fd)
            self._remove_run_dir()

    def _remove_run_dir(self) -> None:
        try:
            info = os.lstat(RUN_SUBDIR, dir_fd=self.fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise os_failure(str(self.path / RUN_SUBDIR), exc, FailureReason.IO_ERROR) from None
        if not stat.S_ISDIR(info.st_mode):  # a symlink or file planted under our name
            raise ProbeFailure(
                FailureReason.UNSAFE_TARGET,
                f"{self.path / RUN_SUBDIR}: exists and is not a directory fioprobe made; "
                "remove it by hand",
            )
        try:
            # rmtree with dir_fd works on descriptors and never follows a symlink inside.
            shutil.rmtree(RUN_SUBDIR, dir_fd=self.fd)
        except OSError as exc:
            raise os_failure(str(self.path / RUN_SUBDIR), exc, FailureReason.IO_ERROR) from None


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
