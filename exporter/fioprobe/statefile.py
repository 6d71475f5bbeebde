"""Small JSON files in one directory, written atomically and never through a symlink.

The state of a probe lives on the probe volume itself (`<probe dir>/.fioprobe-state/`), a
directory other tenants of a shared volume or hostPath may have written to. So every access
is relative to a directory file descriptor and refuses symlinks (`O_NOFOLLOW`): a planted
`.fioprobe-state` link, a state file or lock file that is a link, all fail with ELOOP
instead of reading or creating files elsewhere. The directory that holds the state
directory is never created here: a probe directory that is missing must stay missing
(an unmounted volume is a failure to report, not a directory to make).

Every OSError becomes a `StateError` whose reason follows the errno: a read-only remount is
`read_only`, a full disk `no_space`, a failing disk `io_error`, anything else `state_error`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from .errors import FailureReason, FioprobeError, reason_for_errno

#: A state file is a few KiB; anything much larger was not written by fioprobe.
MAX_STATE_BYTES = 4 * 1024 * 1024
#: Name encoding for grouping-key values: these characters stay, all others become %XX.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
#: File names longer than this are shortened with a hash (ext4 allows 255 bytes).
_MAX_NAME = 200


class StateError(FioprobeError):
    """The state cannot be read or written, or cannot be trusted (exit 2, reason by errno)."""

    reason = FailureReason.STATE_ERROR

    def __init__(self, message: str, reason: FailureReason = FailureReason.STATE_ERROR) -> None:
        super().__init__(message)
        self.reason = reason


def state_error(what: str, exc: OSError) -> StateError:
    """A StateError for an OSError, with the reason its errno stands for."""
    reason = reason_for_errno(exc.errno, FailureReason.STATE_ERROR)
    if reason in (FailureReason.NO_DIRECTORY, FailureReason.UNSAFE_TARGET):
        reason = FailureReason.STATE_ERROR
    problem = "is a symlink; refusing to follow it" if exc.errno == errno.ELOOP else exc.strerror
    return StateError(f"{what}: {problem}", reason)


def file_name(key: dict[str, str], prefix: str = "", suffix: str = ".json") -> str:
    """A file name for a grouping key, different for every different key.

    Values are %-encoded except letters, digits, '.' and '-', and pairs are joined with '_'
    (which values never contain), so `fast ssd` and `fast_ssd` get two files.
    """
    name = "_".join(f"{k}-{_encode(v)}" for k, v in key.items())
    if len(prefix) + len(name) + len(suffix) > _MAX_NAME:
        import hashlib

        digest = hashlib.sha256(name.encode()).hexdigest()[:32]
        name = name[: _MAX_NAME - len(prefix) - len(suffix) - 33] + "~" + digest
    return prefix + name + suffix


def _encode(value: str) -> str:
    return "".join(c if c in _PLAIN else "".join(f"%{b:02X}" for b in c.encode()) for c in value)


@dataclass(frozen=True, slots=True)
class StateDir:
    """A directory of state files: `path`, created (one level) inside an existing parent.

    `create_parents` is for the per-user default (~/.local/state/fioprobe); the state
    directory inside a probe directory never creates the probe directory.
    """

    path: Path
    create_parents: bool = False

    @contextmanager
    def opened(self) -> Iterator[int]:
        """A descriptor of the directory, created if missing, never through a symlink."""
        parent, name = self.path.parent, self.path.name
        where = str(self.path)
        try:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            if self.create_parents:
                parent.mkdir(parents=True, exist_ok=True)
            else:  # the probe directory: never through a symlink, as the probe itself
                flags |= os.O_NOFOLLOW
            parent_fd = os.open(parent, flags)
        except OSError as exc:
            raise state_error(f"{parent}", exc) from None
        try:
            with suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=parent_fd)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise StateError(f"{where}: is not a directory") from None
            raise state_error(where, exc) from None
        finally:
            os.close(parent_fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def file(self, name: str) -> StateFile:
        return StateFile(self, name)

    def group_file(self, grouping_key: dict[str, str]) -> StateFile:
        """The state file of one group: its name is the grouping key's (`file_name`)."""
        return self.file(file_name(grouping_key))


ENV_STATE_DIR = "FIOPROBE_STATE_DIR"


def default_state_file(grouping_key: dict[str, str]) -> StateFile:
    """Per-group state file under $FIOPROBE_STATE_DIR (default ~/.local/state/fioprobe),
    for commands run without a probe directory (`fioprobe push`)."""
    base = os.environ.get(ENV_STATE_DIR) or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "fioprobe"
    )
    return StateDir(Path(base), create_parents=True).group_file(grouping_key)


@dataclass(frozen=True, slots=True)
class StateFile:
    """One JSON file in a `StateDir`, with a lock file beside it."""

    directory: StateDir
    name: str

    @property
    def path(self) -> Path:
        return self.directory.path / self.name

    @contextmanager
    def locked(self, *, wait: bool = True) -> Iterator[None]:
        """Hold an exclusive flock on `<name>.lock` for one read-merge-save-push cycle.

        The state file itself is replaced by rename, so its inode cannot carry the lock; one
        lock per file, so groups sharing a directory do not wait for each other.
        """
        with self.directory.opened() as dir_fd:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(self.name + ".lock", flags, 0o600, dir_fd=dir_fd)
            except OSError as exc:
                raise state_error(f"{self.path}.lock", exc) from None
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except OSError as exc:
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise StateError(f"{self.path}: another fioprobe holds its lock") from None
                    raise state_error(f"{self.path}.lock", exc) from None
                yield
            finally:
                os.close(fd)

    def read(self) -> object | None:
        """The parsed JSON, or None when there is no file yet."""
        with self.directory.opened() as dir_fd:
            try:
                fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise state_error(str(self.path), exc) from None
            try:
                with os.fdopen(fd, "rb") as handle:
                    raw = handle.read(MAX_STATE_BYTES + 1)
            except OSError as exc:
                raise state_error(str(self.path), exc) from None
        if len(raw) > MAX_STATE_BYTES:
            raise StateError(f"{self.path}: state is corrupt (larger than {MAX_STATE_BYTES} bytes)")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            problem = getattr(exc, "msg", None) or type(exc).__name__
            raise StateError(f"{self.path}: state is corrupt (not JSON: {problem})") from None

    def write(self, data: object) -> None:
        """Write atomically: a crash leaves the old or the new file, never half of one."""
        body = json.dumps(data, sort_keys=True, allow_nan=False).encode()
        tmp = f".{self.name}.{secrets.token_hex(6)}.tmp"
        with self.directory.opened() as dir_fd:
            try:
                fd = os.open(
                    tmp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=dir_fd,
                )
            except OSError as exc:
                raise state_error(str(self.path), exc) from None
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(body)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError as exc:
                _unlink_quietly(tmp, dir_fd)
                raise state_error(str(self.path), exc) from None
            except BaseException:
                _unlink_quietly(tmp, dir_fd)
                raise

    def remove(self) -> None:
        """Delete the file if it is there (a state that could not be kept up to date)."""
        with self.directory.opened() as dir_fd:
            try:
                os.unlink(self.name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise state_error(str(self.path), exc) from None


def _unlink_quietly(name: str, dir_fd: int) -> None:
    with suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)
