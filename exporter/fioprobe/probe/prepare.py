"""Prepare a node's hostPath directories for the probe: owner UID:UID, mode 0700.

The deployment mounts each directory the probe keeps on a node (the etcd probe directory,
the state directory) as a hostPath volume of type DirectoryOrCreate, which the kubelet
creates as root:root 0755 when it is missing, into an init container that runs as uid 0
with CAP_CHOWN and CAP_FOWNER only. This module is that init container's one job: hand
each directory to the probe's user, and refuse every directory it cannot prove is the one
the deployment named and free to take.

Why so careful: the init container runs as root on every node, and a hostPath is whatever
the node has at that path. A symlink there (in the last or any parent component) makes the
kubelet mount its target, so a chown would hand someone else's directory, `/etc` or `/`, to
the probe's user; a directory that already holds files belongs to someone. So, for every
path, before anything is changed anywhere (a refusal of one leaves all untouched):

1. MOUNT is opened once, without following a symlink, as an O_PATH descriptor, and every
   later step works on that descriptor, so nothing can be swapped in between. O_PATH, not
   O_RDONLY: a directory already prepared is 0700 and owned by the probe, and uid 0 without
   CAP_DAC_READ_SEARCH (which the init container does not have) may not open it for
   reading. Mode and owner are changed through `/proc/self/fd/N`, the kernel's link to
   exactly that open file (not a lookup by name), because fchmod/fchown refuse an O_PATH
   descriptor.
2. The descriptor must be the root of the mount that /proc/self/mountinfo lists last at
   MOUNT (its mount id, from /proc/self/fdinfo, is that entry's). That entry's root field is
   the path inside its filesystem that was bind-mounted, after the node's symlinks were
   followed: HOSTPATH must be it or end with it at a component boundary (the node may mount
   /var apart, then the root is /lib/etcd-fioprobe for /var/lib/etcd-fioprobe). A root of
   `/` proves nothing (HOSTPATH is a filesystem's root, or a symlink to one): it is never
   changed, only accepted when already exactly prepared.
3. The owner decides: the probe's own (fix group and mode); root, only when the directory
   is empty and writable by root alone (what DirectoryOrCreate makes); anyone else, never.

Known limits of the suffix rule, which sees the mounted directory's path inside its own
filesystem only: a symlink whose target's path in its filesystem is a suffix of HOSTPATH
passes (/var/lib/etcd-fioprobe -> /mnt/disk/etcd-fioprobe, with /mnt/disk a filesystem of
its own, is mounted with root /etcd-fioprobe); the owner rules still hold for that target
(empty and root's, or the probe's already). Only the node's root can make such a symlink,
and root on the node is outside what fioprobe defends against (docs/SAFETY.md). The other
way round, on btrfs the root starts with the subvolume's path (/@/var/..., /root/...), so a
directory in a subvolume is refused even without a symlink (failing closed; the line says
why).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from fioprobe.errors import UsageError
from fioprobe.text import printable

__all__ = ["MODE", "Outcome", "PathPair", "Ready", "Refusal", "parse_path", "prepare_dirs"]

#: The one mode a prepared directory has: the probe's alone.
MODE = 0o700
#: A container's mount table has tens of entries, a busy node's a few thousand; more than
#: this is not a mount table, and reading it must end.
MAX_MOUNTINFO_LINES = 200_000
#: /proc/self/fdinfo/N is a few short lines.
MAX_FDINFO_BYTES = 64 * 1024
#: Linux's PATH_MAX: a longer path cannot be opened anyway.
MAX_PATH_BYTES = 4096
_OPEN_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: mountinfo escapes space, tab, newline and backslash in its path fields as \ooo.
_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True)
class PathPair:
    """One `--path MOUNT=HOSTPATH`: where the volume is in this container, and the path on
    the node the deployment gave the kubelet."""

    mount: str
    host: str

    @property
    def shown(self) -> str:
        return f"{printable(self.mount, 300)} (node {printable(self.host, 300)})"


@dataclass(frozen=True)
class Refusal:
    """A path that failed a check: nothing is changed on any path."""

    pair: PathPair
    reason: str


@dataclass(frozen=True)
class Ready:
    """A path that passed every check, with its open descriptor and its state then."""

    pair: PathPair
    fd: int
    before: os.stat_result
    #: The root of a filesystem: accepted only as already prepared, never changed.
    filesystem_root: bool


@dataclass(frozen=True)
class Outcome:
    """What became of every path: lines to print, and whether any path was refused."""

    #: One line per path that was prepared or already was (empty when any was refused).
    done: list[str]
    #: One line per refused path.
    refused: list[Refusal]
    #: The paths that passed their checks but were left as they were, because another
    #: path was refused.
    untouched: list[PathPair]


def parse_path(text: str) -> PathPair:
    """One `--path` argument: MOUNT=HOSTPATH, split at the first `=` (so MOUNT has none),
    both absolute and normalised. Normalised, because the checks compare paths as strings
    with what the kernel lists, which is always normalised: `/var/lib/x/` would never match."""
    mount, equals, host = text.partition("=")
    if not equals:
        raise UsageError(
            f"prepare-dirs: --path {printable(text, 300)!r} must be MOUNT=HOSTPATH (where the "
            "volume is mounted in this container = its hostPath on the node)"
        )
    for name, path in (("MOUNT", mount), ("HOSTPATH", host)):
        shown = printable(path, 300)
        if "\0" in path:
            raise UsageError(f"prepare-dirs: --path {name} {shown!r} holds a NUL character")
        if not path.startswith("/"):
            raise UsageError(
                f"prepare-dirs: --path {name} {shown!r} must be an absolute path (from /)"
            )
        normal = os.path.normpath(path)
        if normal != path or path.startswith("//"):
            raise UsageError(
                f"prepare-dirs: --path {name} {shown!r} is not a normalised path (no '.', "
                f"'..', '//' or trailing '/'): write {printable(normal.lstrip('/'), 300)!r} "
                "after a single '/'"
            )
        if len(os.fsencode(path)) > MAX_PATH_BYTES:
            raise UsageError(f"prepare-dirs: --path {name} is longer than {MAX_PATH_BYTES} bytes")
        if path == "/":
            raise UsageError(
                f"prepare-dirs: --path {name} must not be / (the probe never owns a root directory)"
            )
    return PathPair(mount, host)


def prepare_dirs(pairs: Sequence[PathPair], owner: int) -> Outcome:
    """Check every path, then, only when all passed, prepare each (module docstring)."""
    _no_duplicates(pairs)
    with ExitStack() as stack:
        checked: list[Ready | Refusal] = []
        seen: dict[tuple[int, int], PathPair] = {}
        for pair in pairs:
            result = _check(pair, owner, stack)
            if isinstance(result, Ready):
                key = (result.before.st_dev, result.before.st_ino)
                if key in seen:
                    result = Refusal(
                        pair, f"is the same directory as {seen[key].shown}; give it once"
                    )
                else:
                    seen[key] = pair
            checked.append(result)
        refused = [r for r in checked if isinstance(r, Refusal)]
        ready = [r for r in checked if isinstance(r, Ready)]
        if refused:
            return Outcome([], refused, [r.pair for r in ready])
        done: list[str] = []
        for item in ready:
            try:
                done.append(_apply(item, owner))
            except UsageError as exc:
                before = "; ".join(done) if done else "nothing"
                raise UsageError(f"{exc}; before it: {before}") from None
        return Outcome(done, [], [])


def _no_duplicates(pairs: Sequence[PathPair]) -> None:
    for field in ("mount", "host"):
        values = [getattr(pair, field) for pair in pairs]
        for value in dict.fromkeys(values):
            if values.count(value) > 1:
                raise UsageError(
                    f"prepare-dirs: --path {'MOUNT' if field == 'mount' else 'HOSTPATH'} "
                    f"{printable(value, 300)!r} is given twice"
                )


def _check(pair: PathPair, owner: int, stack: ExitStack) -> Ready | Refusal:
    """Steps 1 to 3 of the module docstring for one path; changes nothing."""
    try:
        fd = os.open(pair.mount, _OPEN_FLAGS)
    except OSError as exc:
        return Refusal(pair, _open_failure(pair.mount, exc))
    stack.callback(os.close, fd)
    try:
        info = os.fstat(fd)
        entry = _mount_entry(os.fsencode(pair.mount))
        if entry is None:
            return Refusal(
                pair,
                "is not a mount point in this container: the hostPath volume is not mounted "
                "there (the container's volumeMounts must mount it at exactly this path)",
            )
        mount_id = _mount_id_of(fd)
    except OSError as exc:
        raise UsageError(
            f"prepare-dirs: {pair.shown}: cannot read this process's mounts in /proc: "
            f"{exc.strerror or exc}"
        ) from None
    if mount_id != entry.mount_id:
        return Refusal(
            pair,
            "is hidden by another mount (a mount over it or over a parent): the directory "
            "there is not the volume",
        )
    host = os.fsencode(pair.host)
    root = entry.root
    filesystem_root = root == b"/"
    if not filesystem_root and not host.endswith(root):
        # `root` starts with '/', so a suffix match (equality included) ends at a component
        # boundary of HOSTPATH.
        return Refusal(pair, _not_the_host_path(pair, entry))
    mode, uid, gid = stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid
    prepared = uid == owner and gid == owner and mode == MODE
    if filesystem_root and not prepared:
        return Refusal(
            pair,
            f"is the root of a filesystem on the node (owner {uid}:{gid} mode {mode:04o}): a "
            "disk mounted there, or a symlink to a filesystem's root, so fioprobe cannot tell "
            "which directory it is and never changes a filesystem root; prepare it by hand on "
            f"the node: install -d -o {owner} -g {owner} -m 0700 {printable(pair.host, 300)}",
        )
    if prepared:
        return Ready(pair, fd, info, filesystem_root)
    if uid == 0:
        refusal = _root_owned_refusal(fd, mode)
        if refusal is not None:
            return Refusal(pair, refusal)
    elif uid != owner:
        return Refusal(
            pair,
            f"owned by uid {uid}, not by root or {owner}: another program's directory; "
            "fioprobe takes over only an empty directory of root's (what the kubelet makes)",
        )
    if entry.read_only:
        return Refusal(
            pair,
            f"needs owner {owner}:{owner} mode 0700 (it is {uid}:{gid} {mode:04o}) but is "
            "mounted read-only in this container",
        )
    return Ready(pair, fd, info, filesystem_root)


def _open_failure(mount: str, exc: OSError) -> str:
    """Why MOUNT could not be opened as a directory, in the container's words."""
    if exc.errno == errno.ENOENT:
        return "does not exist in this container (no volume is mounted there)"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            kind = os.lstat(mount).st_mode
        except OSError:
            kind = 0
        if stat.S_ISLNK(kind):
            return "is a symlink in this container; fioprobe never follows one"
        return "is not a directory (or a parent of it is not)"
    return f"cannot be opened: {exc.strerror or exc}"


def _not_the_host_path(pair: PathPair, entry: _MountEntry) -> str:
    shown = printable(os.fsdecode(entry.root), 300)
    if entry.root.endswith(b"//deleted"):
        return (
            f"the node's directory mounted here ({shown}) was deleted after it was mounted; "
            "restart the pod"
        )
    # On btrfs the root starts with the subvolume's path (/@/var/..., /root/...), which no
    # host path shows: such a node is refused too, and the message says why.
    btrfs = (
        " (on btrfs the root starts with the subvolume's path, so a directory in a "
        "subvolume that is not the filesystem's top is refused even without a symlink)"
        if entry.fstype == b"btrfs"
        else ""
    )
    return (
        f"the node's directory mounted here is {shown!r} within its filesystem, and "
        f"{printable(pair.host, 300)!r} does not end with it: the host path or one of its "
        "parents is a symlink on the node (the kubelet followed it), or another directory is "
        "mounted here; fioprobe never prepares a directory reached through a symlink; give "
        f"the real path (readlink -f on the node){btrfs}"
    )


def _root_owned_refusal(fd: int, mode: int) -> str | None:
    """Why a root-owned directory may not be taken over, or None when it may: only one that
    nobody but root can write (so nothing can appear in it between this check and the
    change) and that is empty (a directory with contents is someone's)."""
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"owned by root with mode {mode:04o}, writable by others: a shared directory, not "
            "one the kubelet made (0755); fioprobe takes over only an empty directory of "
            "root's that only root can write"
        )
    try:
        empty = _is_empty(fd)
    except OSError as exc:
        return f"owned by root, and cannot be listed to see that it is empty: {exc.strerror}"
    if not empty:
        return (
            "owned by root and not empty: someone else's directory; fioprobe takes over "
            "only an empty one (what the kubelet's DirectoryOrCreate makes)"
        )
    return None


def _is_empty(fd: int) -> bool:
    """Whether the directory open as `fd` (O_PATH) has no entry. It is opened again for
    reading through its /proc link, which names the open file itself, and checked to be
    the same directory; one entry is enough to know, so the listing stops there."""
    listing = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        ours, opened = os.fstat(fd), os.fstat(listing)
        if (ours.st_dev, ours.st_ino) != (opened.st_dev, opened.st_ino):
            raise OSError(errno.EXDEV, "its /proc/self/fd link names another directory")
        with os.scandir(listing) as entries:
            return next(iter(entries), None) is None
    finally:
        os.close(listing)


def _apply(item: Ready, owner: int) -> str:
    """Step 4: mode first, then owner, checked afterwards on the descriptor.

    Why mode first: from root:root 0755, a chmod to 0700 gives root:root 0700 and the
    chown then gives UID:UID 0700, so at no moment is the directory writable by a group or
    by everyone, nor the probe's with a looser mode than 0700. The other order would give
    the probe's user a directory of the old mode (group- or world-readable, 0755) for a
    moment, and, had the old mode been looser, writable by others while the probe owned
    it. For a directory already the probe's, the chmod (which needs CAP_FOWNER: uid 0 is
    not its owner) narrows it before its group is changed, for the same reason.
    """
    before = item.before
    mode, uid, gid = stat.S_IMODE(before.st_mode), before.st_uid, before.st_gid
    was = f"owner {uid}:{gid} mode {mode:04o}"
    if uid == owner and gid == owner and mode == MODE:
        note = (
            " (the root of a filesystem: owner and mode checked; which directory it is cannot be)"
            if item.filesystem_root
            else ""
        )
        return f"already prepared {item.pair.shown}: {was}{note}"
    link = f"/proc/self/fd/{item.fd}"
    if mode != MODE:
        _change(item, "mode", "CAP_FOWNER", lambda: os.chmod(link, MODE))
    if uid != owner or gid != owner:
        _change(item, "owner", "CAP_CHOWN", lambda: os.chown(link, owner, owner))
    after = os.fstat(item.fd)
    got = (stat.S_IMODE(after.st_mode), after.st_uid, after.st_gid, after.st_ino, after.st_dev)
    if got != (MODE, owner, owner, before.st_ino, before.st_dev):
        raise UsageError(
            f"prepare-dirs: {item.pair.shown}: is owner {after.st_uid}:{after.st_gid} mode "
            f"{stat.S_IMODE(after.st_mode):04o} after the change, not {owner}:{owner} 0700"
        )
    return f"prepared {item.pair.shown}: {was} -> owner {owner}:{owner} mode 0700"


def _change(item: Ready, what: str, capability: str, call: Callable[[], None]) -> None:
    """Make one change; a refusal by the kernel names the capability it needs."""
    try:
        call()
    except OSError as exc:
        hint = ""
        if exc.errno in (errno.EPERM, errno.EACCES):
            needed = "uid 0" if os.geteuid() != 0 else capability
            hint = f" (the container needs {needed})"
        raise UsageError(
            f"prepare-dirs: {item.pair.shown}: cannot change its {what}: "
            f"{exc.strerror or exc}{hint}"
        ) from None


@dataclass(frozen=True)
class _MountEntry:
    """What one line of /proc/self/mountinfo says that the checks use."""

    mount_id: int
    #: The path inside its filesystem that is mounted (field 4), unescaped.
    root: bytes
    #: The mount itself is read-only in this container (its own options, field 6).
    read_only: bool
    #: The filesystem's type (the first field after the `-` separator).
    fstype: bytes


def _mount_entry(mount: bytes) -> _MountEntry | None:
    """The last entry of /proc/self/mountinfo whose mount point is `mount`: the last one
    mounted there, the one a path lookup reaches."""
    found = None
    for fields in _mountinfo():
        if _unescape(fields[4]) == mount:
            options = fields[5].split(b",")
            tail = fields[fields.index(b"-", 6) + 1 :] if b"-" in fields[6:] else []
            fstype = tail[0] if tail else b""
            found = _MountEntry(int(fields[0]), _unescape(fields[3]), b"ro" in options, fstype)
    return found


def _mountinfo() -> Iterator[list[bytes]]:
    with open("/proc/self/mountinfo", "rb") as handle:
        for number, line in enumerate(handle):
            if number >= MAX_MOUNTINFO_LINES:
                raise OSError(errno.E2BIG, f"more than {MAX_MOUNTINFO_LINES} mounts")
            fields = line.rstrip(b"\n").split(b" ")
            if len(fields) > 5 and fields[0].isdigit():
                yield fields


def _unescape(field: bytes) -> bytes:
    return _ESCAPE.sub(lambda match: bytes([int(match[1], 8) & 0xFF]), field)


def _mount_id_of(fd: int) -> int:
    """The id of the mount the open file is on, as /proc/self/mountinfo numbers it."""
    with open(f"/proc/self/fdinfo/{fd}", "rb") as handle:
        text = handle.read(MAX_FDINFO_BYTES)
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name == b"mnt_id" and value.strip().isdigit():
            return int(value)
    raise OSError(errno.ENOTSUP, "no mnt_id in /proc/self/fdinfo (Linux 3.15 or later needed)")
