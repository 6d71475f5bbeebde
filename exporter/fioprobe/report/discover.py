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

import io
import os
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

#: File names read inside folders and archives.
RESULT_SUFFIXES = (".json", ".txt", ".log", ".out")
#: Archives opened with tarfile (compression detected by tarfile itself).
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")
#: A single result larger than this is not a fio output; it is listed, not loaded.
MAX_RESULT_BYTES = 64 * 1024 * 1024


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


def count_candidates(paths: list[str | os.PathLike[str]]) -> int | None:
    """How many plain files `discover` will read (for a progress bar); None if archives make
    the total unknown without reading them."""
    total = 0
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for _, _, files in _sorted_walk(path):
                for name in files:
                    if is_archive(name):
                        return None
                    total += is_candidate(name)
        elif is_archive(path.name):
            return None
        else:
            total += 1
    return total


def _sorted_walk(root: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    for folder, dirs, files in os.walk(root, onerror=None):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield folder, dirs, sorted(f for f in files if not f.startswith("."))


def _walk_dir(root: Path) -> Iterator[Source | Unreadable]:
    base = root.resolve().name or str(root)
    for folder, _, files in _sorted_walk(root):
        rel = Path(folder).relative_to(root).parts
        for name in files:
            path = Path(folder) / name
            if is_archive(name):
                yield from _walk_archive(path, (base, *rel, _archive_stem(name)))
            elif is_candidate(name):
                yield _read_file(path, (base, *rel, name))


def _read_file(path: Path, parts: tuple[str, ...]) -> Source | Unreadable:
    try:
        stat = path.stat()
        if stat.st_size > MAX_RESULT_BYTES:
            return Unreadable(str(path), f"too large for a fio result ({stat.st_size} bytes)")
        return Source(str(path), parts, path.read_bytes(), stat.st_mtime)
    except OSError as exc:
        return Unreadable(str(path), f"cannot read: {exc.strerror or exc}")


def _archive_stem(name: str) -> str:
    lower = name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _walk_archive(path: Path, parts: tuple[str, ...]) -> Iterator[Source | Unreadable]:
    """Members of a tar archive, streamed: one pass over the (compressed) file, each member
    read into memory from the stream; nothing is written to disk. Nested archives recurse."""
    try:
        with open(path, "rb") as handle:
            yield from _walk_tar_stream(handle, str(path), parts)
    except OSError as exc:
        yield Unreadable(str(path), f"cannot read: {exc.strerror or exc}")


def _walk_tar_stream(
    handle: BinaryIO, display: str, parts: tuple[str, ...]
) -> Iterator[Source | Unreadable]:
    try:
        archive = tarfile.open(fileobj=handle, mode="r|*")  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield Unreadable(display, f"not a readable tar archive: {exc}")
        return
    try:
        with archive:
            for member in archive:
                member_parts = tuple(p for p in member.name.split("/") if p not in ("", "."))
                if not member.isfile() or not member_parts:
                    continue
                if any(p.startswith(".") for p in member_parts):
                    continue
                leaf = member_parts[-1]
                if not (is_candidate(leaf) or is_archive(leaf)):
                    continue
                name = f"{display}/{'/'.join(member_parts)}"
                if member.size > MAX_RESULT_BYTES and not is_archive(leaf):
                    yield Unreadable(name, f"too large for a fio result ({member.size} bytes)")
                    continue
                extracted = archive.extractfile(member)
                data = extracted.read() if extracted is not None else b""
                if is_archive(leaf):
                    inner = (*parts, *member_parts[:-1], _archive_stem(leaf))
                    yield from _walk_tar_stream(io.BytesIO(data), name, inner)
                else:
                    yield Source(name, (*parts, *member_parts), data, float(member.mtime))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        yield Unreadable(display, f"archive is damaged: {exc}")
