"""Find fio results in files, nested folders and tar archives (read in place, never unpacked).

A benchmark battery is usually a tree such as `<battery>_<cluster>-fio-<host>/<job>/run1.json`,
sometimes shipped as one `.tar.gz`. Every candidate becomes a `Source`: a display name, the
path components the grouping rules look at, its bytes and a modification time (the fallback
timestamp for fio versions that write none).

Which files are candidates: in a folder or an archive, names ending in `.json`, `.txt`,
`.log` or `.out` (fio's usual outputs) and nested archives are read; hidden entries are skipped.
A file named explicitly on the command line is always read, whatever its name. Anything that
cannot be read becomes an `Unreadable` with the reason, and the walk goes on.
"""

from __future__ import annotations

import bz2
import collections
import gzip
import io
import lzma
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

#: File names read inside folders and archives.
RESULT_SUFFIXES = (".json", ".txt", ".log", ".out")
#: Archives streamed through tarfile (gzip, bzip2 or xz recognized by their magic bytes).
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")
#: A single result larger than this is not a fio output; it is listed, not loaded.
MAX_RESULT_BYTES = 64 * 1024 * 1024
#: Archives inside archives are followed this deep (the archive named or found is level 1).
#: Batteries are at most an archive of per-host archives; deeper is a hostile file.
MAX_ARCHIVE_DEPTH = 4
#: Unpacked bytes one archive (nested archives included) may pass through the stream. fio
#: results of a whole battery are megabytes; a compression bomb is gigabytes (gzip inflates
#: ~1000:1, xz far more), and this bounds the time it can take, as MAX_RESULT_BYTES bounds
#: the memory.
MAX_ARCHIVE_BYTES = 4 * 1024**3
#: Members one archive (nested archives included) may hold, whatever their size: headers
#: cost time and memory too, and a megabyte of xz holds a million empty members. A battery is
#: a few files per run and a few thousand runs at most; ten times that is still a battery.
MAX_ARCHIVE_MEMBERS = 100_000
#: Folders below an input folder are followed this deep. A battery's tree is about ten
#: levels (cbt's results/<id>/<benchmark>/<option>/.../output.0); a thousand is a planted
#: tree, and the walk itself is iterative, so the bound is a choice, not a limit of the stack.
MAX_FOLDER_DEPTH = 64
#: Bytes tarfile may read for one member's headers (pax records, GNU long names): it reads
#: them whole into memory before the walk sees the member. Real ones hold a path, times and
#: a few extended attributes, kilobytes; a 300 MiB pax record in a 1 MiB .tar.gz is a bomb.
MAX_HEADER_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Source:
    """One candidate result file, on disk or inside an archive."""

    #: What the report calls it: a path, or `archive.tar.gz/member/path`.
    name: str
    #: Path components from the input root down to the file (root's own name first); the
    #: folder naming pattern is matched against these.
    parts: tuple[str, ...]
    data: bytes
    mtime: float


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A candidate that could not be read or parsed, and why (one line)."""

    name: str
    reason: str


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def is_candidate(name: str) -> bool:
    lower = name.lower()
    return lower.endswith(RESULT_SUFFIXES) and not os.path.basename(name).startswith(".")


def discover(paths: list[str | os.PathLike[str]]) -> Iterator[Source | Unreadable]:
    """Every candidate under `paths`, in a stable order (sorted within each folder)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from _walk_dir(path)
        elif is_archive(path.name):
            yield from _walk_archive(path, (_archive_stem(path.name),))
        elif path.exists():
            yield _read_file(path, (path.parent.name or ".", path.name))
        else:
            yield Unreadable(str(path), "no such file or folder")


def count_candidates(paths: Sequence[str | os.PathLike[str]]) -> int | None:
    """How many plain files `discover` will read (for a progress bar); None if archives make
    the total unknown without reading them."""
    total = 0
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for found in _sorted_walk(path):
                for name in found.files:
                    if is_archive(name):
                        return None
                    total += is_candidate(name)
        elif is_archive(path.name):
            return None
        else:
            total += 1
    return total


@dataclass(frozen=True, slots=True)
class _Folder:
    """One folder of a walk: its path, its non-hidden subfolders and other entries (sorted),
    or why it was not listed."""

    path: str
    rel: tuple[str, ...]
    dirs: list[str]
    files: list[str]
    problem: str | None = None


def _sorted_walk(root: Path) -> Iterator[_Folder]:
    """Folders under `root`, depth first, each sorted, without recursion and at most
    MAX_FOLDER_DEPTH levels below it. Symbolic links to folders are not followed (a link
    back up would make the walk endless); every other entry is a file to the walk, whatever
    its type: reading it decides."""
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, rel = stack.pop()
        if len(rel) > MAX_FOLDER_DEPTH:
            yield _Folder(
                folder, rel, [], [],
                f"folders nested more than {MAX_FOLDER_DEPTH} deep below {root}; not read",
            )  # fmt: skip
            continue
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    if is_dir:
                        dirs.append(entry.name)
                    elif not (entry.is_symlink() and os.path.isdir(entry.path)):
                        files.append(entry.name)
        except OSError as exc:
            yield _Folder(folder, rel, [], [], f"cannot list the folder: {exc.strerror or exc}")
            continue
        dirs.sort()
        files.sort()
        yield _Folder(folder, rel, dirs, files)
        stack.extend((os.path.join(folder, name), (*rel, name)) for name in reversed(dirs))


def _walk_dir(root: Path) -> Iterator[Source | Unreadable]:
    base = root.resolve().name or str(root)
    for found in _sorted_walk(root):
        if found.problem is not None:
            yield Unreadable(found.path, found.problem)
            continue
        for name in found.files:
            path = Path(found.path) / name
            if is_archive(name):
                yield from _walk_archive(path, (base, *found.rel, _archive_stem(name)))
            elif is_candidate(name):
                yield _read_file(path, (base, *found.rel, name))


class _NotRegular(OSError):
    """A path that is not a regular file (a FIFO, socket, device or folder): never opened
    to be read, since opening or reading it may block for good or act on a device."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(path: Path) -> tuple[io.BufferedReader, os.stat_result]:
    """`path` opened for reading if, and only if, it is a regular file (a symbolic link to
    one included): looked at before it is opened, so a FIFO or device is never opened, and
    opened non-blocking and checked again with fstat, so a file swapped for a FIFO between
    the two cannot block the read either."""
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise _NotRegular(f"not a regular file ({_kind(before.st_mode)})")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        after = os.fstat(fd)
        if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (
            before.st_dev,
            before.st_ino,
        ):
            raise _NotRegular(f"not a regular file ({_kind(after.st_mode)}, changed while opened)")
        return os.fdopen(fd, "rb"), after
    except BaseException:
        os.close(fd)
        raise


def _read_file(path: Path, parts: tuple[str, ...]) -> Source | Unreadable:
    """A regular file's bytes, never more than MAX_RESULT_BYTES of them: its size on disk is
    not trusted (a file that grows while it is read)."""
    try:
        handle, info = _open_regular(path)
        with handle:
            if info.st_size > MAX_RESULT_BYTES:
                return Unreadable(str(path), f"too large for a fio result ({info.st_size} bytes)")
            data = handle.read(MAX_RESULT_BYTES + 1)
        if len(data) > MAX_RESULT_BYTES:
            return Unreadable(
                str(path), f"too large for a fio result (over {MAX_RESULT_BYTES} bytes)"
            )
        return Source(str(path), parts, data, info.st_mtime)
    except _NotRegular as exc:
        return Unreadable(str(path), str(exc))
    except OSError as exc:
        return Unreadable(str(path), f"cannot read: {exc.strerror or exc}")


def _archive_stem(name: str) -> str:
    lower = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _walk_archive(path: Path, parts: tuple[str, ...]) -> Iterator[Source | Unreadable]:
    """Members of a tar archive, streamed: one pass over the (compressed) file, each result
    read into memory from the stream; nothing is written to disk. Nested archives are
    streamed too, from inside the outer stream, up to MAX_ARCHIVE_DEPTH levels, and the
    whole walk stops after MAX_ARCHIVE_BYTES of unpacked members or MAX_ARCHIVE_MEMBERS
    members."""
    try:
        handle, _ = _open_regular(path)
        with handle:
            yield from _walk_tar_stream(
                handle,
                str(path),
                parts,
                _Walk(str(path), MAX_ARCHIVE_BYTES, MAX_ARCHIVE_MEMBERS),
                1,
            )
    except _BudgetSpent as spent:
        yield Unreadable(spent.display, spent.reason)
    except _NotRegular as exc:
        yield Unreadable(str(path), str(exc))
    except OSError as exc:
        yield Unreadable(str(path), f"cannot read: {exc.strerror or exc}")


class _BudgetSpent(Exception):
    """The archive unpacks to more than MAX_ARCHIVE_BYTES: the rest of it is not read."""

    def __init__(self, display: str, reason: str) -> None:
        super().__init__(reason)
        self.display = display
        self.reason = reason


@dataclass(slots=True)
class _Walk:
    """What one top-level archive may still cost: unpacked bytes left to pass over (headers
    and padding included), and members left to look at (of any type, empty or not)."""

    display: str
    left: int
    members_left: int

    def count_member(self) -> None:
        self.members_left -= 1
        if self.members_left < 0:
            raise _BudgetSpent(
                self.display,
                f"has more than {MAX_ARCHIVE_MEMBERS} members (nested archives counted), "
                "more than any battery of fio results: the rest is not read",
            )

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise _BudgetSpent(
                self.display,
                f"unpacks to more than {_mib(MAX_ARCHIVE_BYTES)} (nested archives counted at "
                "each level), more than any battery of fio results: the rest is not read",
            )


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


#: What a damaged archive raises while it is read (the decompressors' own errors included).
_DAMAGED = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)


def _walk_tar_stream(
    handle: io.BufferedReader, display: str, parts: tuple[str, ...], walk: _Walk, depth: int
) -> Iterator[Source | Unreadable]:
    try:
        stream = _TarBytes(_decompressed(handle), display)
        stream.limit = MAX_HEADER_BYTES  # opening reads the first member's headers
        # Stream mode only reads; typeshed's fileobj protocol also asks for write, seek, tell.
        archive = tarfile.open(fileobj=stream, mode="r|")  # type: ignore[call-overload]  # noqa: SIM115 (closed below)
    except _DAMAGED as exc:
        yield Unreadable(display, f"not a readable tar archive: {exc}")
        return
    try:
        with archive:
            passed = 0  # stream offset up to which the walk has paid
            while True:
                # Beyond what the walk has paid for, tarfile reads only the next headers.
                stream.limit = passed + MAX_HEADER_BYTES
                member = archive.next()
                stream.limit = None
                if member is None:
                    break
                # In stream mode tarfile keeps every header it passed (a million empty
                # members are a million objects); the walk never looks back at them.
                archive.members.clear()
                walk.count_member()
                # tarfile's offset is now past this member's data: its cost is everything
                # from the last member's end, headers (pax, long names), data and padding.
                walk.spend(archive.offset - passed)
                passed = archive.offset
                yield from _member(archive, member, display, parts, walk, depth)
            # tarfile ends its walk quietly where a header is cut short or unreadable, so
            # an archive cut off between members would look whole, its later results
            # silently missing: a whole archive has an end block of zeros there.
            end = stream.block(archive.offset)
            while chunk := stream.read(1 << 16):  # the rest (and a compressed trailer's check)
                walk.spend(len(chunk))
        if len(end) < tarfile.BLOCKSIZE:
            yield Unreadable(display, "archive is damaged: it ends before its end-of-archive block")
        elif end.count(0) != tarfile.BLOCKSIZE:
            yield Unreadable(
                display, "archive is damaged: a header is unreadable; the rest is not read"
            )
    except _DAMAGED as exc:
        yield Unreadable(display, f"archive is damaged: {exc}")


def _decompressed(handle: io.BufferedReader) -> io.BufferedIOBase:
    """`handle`'s bytes uncompressed by the magic of gzip, bzip2 or xz (else as they are).

    Python's own readers, not tarfile's stream mode, which takes a compressed stream that
    ends early for one that ends: these raise EOFError there and check gzip's CRC.
    """
    head = handle.peek(6)[:6]
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=handle, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(handle)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(handle)
    return handle


class _TarBytes:
    """The uncompressed tar stream as tarfile reads it, with the last chunks kept so that
    the block where tarfile stopped can be looked at afterwards (never the whole stream)."""

    #: Bytes kept behind the read position: tarfile reads ahead at most a 10 KiB record
    #: past the block it looks at, whatever sizes the decompressor hands out.
    KEEP_BYTES = 4 * tarfile.RECORDSIZE

    def __init__(self, inner: io.BufferedIOBase, display: str) -> None:
        self.inner = inner
        self.display = display
        self.position = 0
        self.recent: collections.deque[tuple[int, bytes]] = collections.deque()
        #: Stream offset not to read past (while tarfile reads headers), or None.
        self.limit: int | None = None

    def read(self, size: int = -1) -> bytes:
        if self.limit is not None and self.position > self.limit:
            raise _BudgetSpent(
                self.display,
                f"a member's headers (pax or long-name records) take more than "
                f"{_mib(MAX_HEADER_BYTES)}, more than any fio result's: the rest is not read",
            )
        data = self.inner.read(size)
        if data:
            self.recent.append((self.position, data))
            self.position += len(data)
            while len(self.recent) > 1 and (
                self.recent[0][0] + len(self.recent[0][1]) < self.position - self.KEEP_BYTES
            ):
                self.recent.popleft()
        return data

    def block(self, offset: int) -> bytes:
        """The tar block at `offset` as far as the stream has it (shorter where it ended)."""
        while self.position < offset + tarfile.BLOCKSIZE and self.read(tarfile.RECORDSIZE):
            pass
        pieces = [
            data[max(0, offset - start) : offset + tarfile.BLOCKSIZE - start]
            for start, data in self.recent
            if start < offset + tarfile.BLOCKSIZE and start + len(data) > offset
        ]
        return b"".join(pieces)


def _member(
    archive: tarfile.TarFile,
    member: tarfile.TarInfo,
    display: str,
    parts: tuple[str, ...],
    walk: _Walk,
    depth: int,
) -> Iterator[Source | Unreadable]:
    """One member of a streamed archive: a result, a nested archive, or nothing."""
    member_parts = tuple(p for p in member.name.split("/") if p not in ("", "."))
    if not member.isfile() or not member_parts:
        return
    # The caller has charged it: every member is passed over in the stream, read or not,
    # descended into or not (a nested archive's bytes count at each level they pass through).
    leaf = member_parts[-1]
    name = f"{display}/{'/'.join(member_parts)}"
    nested = is_archive(leaf)
    if nested and depth < MAX_ARCHIVE_DEPTH and not any(p.startswith(".") for p in member_parts):
        extracted = archive.extractfile(member)
        # tarfile's member reader is a BufferedReader (typeshed says IO[bytes]): it can peek.
        if isinstance(extracted, io.BufferedReader):
            inner = (*parts, *member_parts[:-1], _archive_stem(leaf))
            # Streamed from inside the outer stream: never the whole member in memory.
            yield from _walk_tar_stream(extracted, name, inner, walk, depth + 1)
        return
    if any(p.startswith(".") for p in member_parts) or not (is_candidate(leaf) or nested):
        return
    if nested:
        yield Unreadable(
            name, f"an archive nested more than {MAX_ARCHIVE_DEPTH} archives deep; not read"
        )
    elif member.size > MAX_RESULT_BYTES:
        yield Unreadable(name, f"too large for a fio result ({member.size} bytes)")
    else:
        extracted = archive.extractfile(member)
        data = extracted.read(MAX_RESULT_BYTES + 1) if extracted is not None else b""
        if len(data) > MAX_RESULT_BYTES:  # a header cannot lie about it, but never trust it
            yield Unreadable(name, f"too large for a fio result (over {MAX_RESULT_BYTES} bytes)")
        else:
            yield Source(name, (*parts, *member_parts), data, float(member.mtime))
