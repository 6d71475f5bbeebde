"""Small JSON files in one directory, written atomically and trusted only when the probe's own.

Where a probe keeps its state follows its volume (docs/SAFETY.md, "Where state lives"): a
dedicated volume (its own PVC) keeps it in `<probe dir>/.fioprobe-state/`; a shared one (a
hostPath directory, a PVC tenants also write) in a state directory of the probe's own
beside it. Either way every directory and file is verified on every open, because a state
file is what the probe pushes as its counters: a forged one would be pushed as the probe's
own measurements.
- Every access is relative to a directory file descriptor and refuses symlinks
  (`O_NOFOLLOW`), so nothing is read or created where a planted link points.
- The state directory and every file in it must be owned by this process's user and
  writable by no one else but that user and its own groups (`trusted`): the kubelet makes
  a volume's files group-writable for the pod's fsGroup, one of this process's groups;
  another group, or everyone, could have written it.
- Files are opened with `O_NONBLOCK` and checked with `fstat` to be regular files: a FIFO
  would block the read forever (with the lock held), a socket or device is no state.
- A state directory of the probe's own (not on the probe volume) must also sit in a
  directory no one else can rename it out of (`_parent_problem`).
The directory that holds the state directory on the probe volume is never created here: a
probe directory that is missing must stay missing (an unmounted volume is a failure to
report, not a directory to make).

Every OSError becomes a `StateError` whose reason follows the errno: a read-only remount is
`read_only`, a full disk `no_space`, a failing disk `io_error`, anything else `state_error`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from fioprobe.errors import FailureReason, FioprobeError, reason_for_errno
from fioprobe.processes import alive

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


def own_groups() -> frozenset[int]:
    """The groups whose write access the probe accepts on its own files: this process's
    effective and supplementary groups (where the kubelet puts the pod's fsGroup).

    Never gid 0: it is the primary group of every container that sets no runAsGroup
    (and of every container on OpenShift), so its members are anyone's tenants."""
    return frozenset({os.getegid(), *os.getgroups()}) - {0}


def untrusted(info: os.stat_result) -> str | None:
    """Why a file or directory is not the probe's own, or None when it is: owned by this
    process's user and writable by no one else but that user and its own groups."""
    uid = os.geteuid()
    if info.st_uid != uid:
        return f"is owned by uid {info.st_uid}, not by the probe's uid {uid}"
    if info.st_mode & stat.S_IWOTH:
        return "is writable by everyone"
    if info.st_mode & stat.S_IWGRP and info.st_gid not in own_groups():
        return f"is writable by group {info.st_gid}, which is not one of the probe's groups"
    return None


def _parent_problem(info: os.stat_result) -> str | None:
    """Why the directory holding a state directory of the probe's own would let someone
    else replace it (rename it away and put another in its place), or None.

    Owned by the probe's user or root; writable by others only when sticky (then no one
    else may rename or remove the probe's entries, and one they made first is theirs and
    refused by `untrusted`)."""
    if info.st_uid not in (os.geteuid(), 0):
        return f"is owned by uid {info.st_uid}, neither the probe's uid nor root"
    shared = info.st_mode & stat.S_IWOTH or (
        info.st_mode & stat.S_IWGRP and info.st_gid not in own_groups()
    )
    if shared and not info.st_mode & stat.S_ISVTX:
        return "is writable by others (and not sticky): they could replace the state directory"
    return None


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symlink",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def kind_of(mode: int) -> str:
    """What a file type is, in words, for a message."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


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

    @property
    def own(self) -> bool:
        """A state directory of the probe's own (configured, or the per-user default), as
        opposed to `.fioprobe-state` on a dedicated probe volume: its parent is checked too."""
        return self.create_parents

    @contextmanager
    def opened(self, *, create: bool = True) -> Iterator[int]:
        """A descriptor of the directory, created (0700) if missing (unless `create` is
        false: then FileNotFoundError), never through a symlink, and only when it is the
        probe's own (`untrusted`)."""
        parent, name = self.path.parent, self.path.name
        where = str(self.path)
        if "\0" in where:
            raise StateError(f"{where!r}: a path cannot hold a NUL byte")
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
            if self.own:
                problem = _parent_problem(os.fstat(parent_fd))
                if problem:
                    raise StateError(f"{parent}: {problem}; refusing to keep state in it")
            if create:
                with suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent_fd)
            info = os.lstat(name, dir_fd=parent_fd)
            if not stat.S_ISDIR(info.st_mode):
                raise StateError(f"{where}: is {kind_of(info.st_mode)}, not a state directory")
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, dir_fd=parent_fd)
        except FileNotFoundError as exc:
            if not create:
                raise
            raise state_error(where, exc) from None
        except OSError as exc:
            if exc.errno == errno.ENOTDIR:
                raise StateError(f"{where}: is not a directory") from None
            raise state_error(where, exc) from None
        finally:
            os.close(parent_fd)
        try:
            problem = untrusted(os.fstat(fd))
            if problem:
                raise StateError(
                    f"{where}: {problem}; fioprobe did not make it and never trusts it"
                )
            yield fd
        finally:
            os.close(fd)

    def file(self, name: str) -> StateFile:
        return StateFile(self, name)

    def group_file(self, grouping_key: dict[str, str]) -> StateFile:
        """The state file of one group: its name is the grouping key's (`file_name`)."""
        return self.file(file_name(grouping_key))


ENV_STATE_DIR = "FIOPROBE_STATE_DIR"
#: The state directory on a dedicated probe volume, beside fio's run directory.
STATE_SUBDIR = ".fioprobe-state"


def default_state_dir() -> StateDir:
    """The per-user state directory: $FIOPROBE_STATE_DIR, else $XDG_STATE_HOME/fioprobe,
    else ~/.local/state/fioprobe."""
    base = os.environ.get(ENV_STATE_DIR) or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "fioprobe"
    )
    return StateDir(Path(base), create_parents=True)


def default_state_file(grouping_key: dict[str, str]) -> StateFile:
    """Per-group state file in the per-user state directory, for commands run without a
    probe directory (`fioprobe push`)."""
    return default_state_dir().group_file(grouping_key)


def state_directory(probe_directory: Path, *, dedicated: bool, state_dir: Path | None) -> StateDir:
    """Where a target's state lives: its configured state directory; else, on a dedicated
    volume (only the probe writes it), `<probe dir>/.fioprobe-state`, so the state persists
    with the volume; else, on a shared volume, the per-user state directory: never on a
    volume that tenants write, where a state file could be forged."""
    if dedicated:
        on_volume = Path(os.path.abspath(probe_directory)) / STATE_SUBDIR
        return StateDir(state_dir, create_parents=True) if state_dir else StateDir(on_volume)
    # Nothing on a shared volume is ever read, not even a state an earlier fioprobe kept
    # there: it could be a tenant's, and the volume may hang while the parent reads it.
    return StateDir(state_dir, create_parents=True) if state_dir else default_state_dir()


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
            fd = _open_own(self.name + ".lock", os.O_RDWR | os.O_CREAT, dir_fd, self.path.parent)
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
                raw = _read_own(self.name, dir_fd, self.path.parent)
            except FileNotFoundError:
                return None
        if len(raw) > MAX_STATE_BYTES:
            raise StateError(f"{self.path}: state is corrupt (larger than {MAX_STATE_BYTES} bytes)")
        try:
            parsed: object = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            problem = getattr(exc, "msg", None) or type(exc).__name__
            raise StateError(f"{self.path}: state is corrupt (not JSON: {problem})") from None
        return parsed

    def write(self, data: object) -> None:
        """Write atomically: a crash leaves the old or the new file, never half of one.

        The temporary file's name carries the writer's PID: one left by a writer that died
        between its creation and the rename (killed, or abandoned in a hung fsync and killed
        when the disk answered) is removed by the next write of the same file."""
        body = json.dumps(data, sort_keys=True, allow_nan=False).encode()
        tmp = f".{self.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        with self.directory.opened() as dir_fd:
            _remove_dead_writers_temporaries(self.name, dir_fd)
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


def _open_own(name: str, flags: int, dir_fd: int, directory: Path) -> int:
    """Open one of the probe's own regular files in its state directory, or raise a
    StateError saying why not (FileNotFoundError passes through when not creating).

    `O_NONBLOCK`: opening a FIFO for reading would otherwise wait for a writer forever.
    The type is checked before the open (a socket cannot even be opened, and says ENXIO,
    an errno that would read as a failing disk) and again on the descriptor."""
    where = str(directory / name)
    try:
        before = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    except OSError as exc:
        raise state_error(where, exc) from None
    else:
        if not stat.S_ISREG(before.st_mode):
            raise StateError(
                f"{where}: is {kind_of(before.st_mode)}, not a state file fioprobe wrote"
            )
    open_flags = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, open_flags, 0o600, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise state_error(where, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateError(
                f"{where}: is {kind_of(info.st_mode)}, not a state file fioprobe wrote"
            )
        problem = untrusted(info)
        if problem:
            raise StateError(f"{where}: {problem}; fioprobe did not write it and never trusts it")
        os.set_blocking(fd, True)
    except OSError as exc:
        os.close(fd)
        raise state_error(where, exc) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_own(name: str, dir_fd: int, directory: Path) -> bytes:
    """The bytes of one of the probe's own state files, at most MAX_STATE_BYTES + 1 of them
    (FileNotFoundError passes through)."""
    fd = _open_own(name, os.O_RDONLY, dir_fd, directory)
    try:
        with os.fdopen(fd, "rb") as handle:
            return handle.read(MAX_STATE_BYTES + 1)
    except OSError as exc:
        raise state_error(str(directory / name), exc) from None


#: How many names of a state directory are looked at for left temporaries, at most.
_MAX_SWEPT_NAMES = 10_000
#: A PID as a temporary file's name carries it (Linux's pid_max is at most 2**22).
_PID = re.compile(r"[1-9][0-9]{0,6}")


def _remove_dead_writers_temporaries(name: str, dir_fd: int) -> None:
    """Unlink `.<name>.<pid>.<hex>.tmp` files of the probe's own whose writer is gone.

    A writer in another PID namespace (a previous pod) whose PID means nothing here is gone
    too: it was abandoned in the kernel, and the SIGKILL it carries ends it when it wakes."""
    prefix = f".{name}."
    with suppress(OSError), os.scandir(dir_fd) as entries:
        for seen, entry in enumerate(entries):
            if seen >= _MAX_SWEPT_NAMES:
                return
            if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
                continue
            pid, _, token = entry.name[len(prefix) : -len(".tmp")].partition(".")
            if not (_PID.fullmatch(pid) and len(token) == 12):
                continue
            if int(pid) < 2 or alive(int(pid)):  # 1 is init's: never a writer that is gone
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid():
                _unlink_quietly(entry.name, dir_fd)


def _unlink_quietly(name: str, dir_fd: int) -> None:
    with suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)
