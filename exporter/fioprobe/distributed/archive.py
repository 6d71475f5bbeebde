"""Each phase's output kept where `fioprobe report` and `fioprobe backfill` read it.

The layout is the benchmark batteries' (docs/REPORT.md): one folder per node,
`<benchmark>_<storageclass>-fio-<node>/<phase>.json`, which the report's default folder
pattern reads as battery, group (the StorageClass) and node.

- `...-fio-all-servers/<phase>.json` is fio's client output as fio wrote it (the JSON
  document, without the servers' text lines before it): every server's entries, each with
  its `hostname` and `port`, and fio's "All clients" aggregate, which is what a reader of
  client/server output takes from it.
- `...-fio-<host>-<port>/<phase>.json` is one server's own entries of that same document,
  unchanged, as a plain fio document (`jobs`), so the report has a row per server.
  `fioprobe_split_from` names the file they were taken from.

Files are created new (`O_EXCL`): an archive never overwrites an earlier benchmark's. A
phase is kept whole or not at all: when a write fails (a full disk), the phase's files and the
folders made for them are removed and the phase fails with the system's reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from fioprobe.errors import FailureReason, ProbeFailure, UsageError, reason_for_errno
from fioprobe.fio.clientserver import ClientServerRun

ALL_SERVERS = "all-servers"


def benchmark_folder(name: str, storageclass: str, node: str) -> str:
    return f"{name}_{storageclass}-fio-{node}"


def server_folder_node(server: str) -> str:
    """A server's `host:port` as a folder name: `:` and anything unusual become `-`."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", server)


def document_text(text: str) -> str:
    """fio's JSON document out of the client's output (the servers' `<host>` lines go)."""
    start = 0 if text.lstrip().startswith("{") else text.find("\n{") + 1
    return text[start:].strip() + "\n"


def check_archive_free(root: Path, name: str, storageclass: str) -> None:
    """Refuse, before any server is contacted, an archive that holds this benchmark already."""
    if not root.is_dir():
        return
    prefix = benchmark_folder(name, storageclass, "")
    taken = sorted(entry.name for entry in root.iterdir() if entry.name.startswith(prefix))
    if taken:
        raise UsageError(
            f"{root} already holds {taken[0]}: give another --output, or another plan name"
        )


def check_archive_writable(root: Path) -> None:
    """Refuse, before any server is contacted, an output this process cannot write into.

    `root` need not exist yet (the first phase makes it); the nearest part of it that does
    must be a directory this process may write. Nothing is created here, so a refused
    --output leaves no folder behind.
    """
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"--output {root}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--output {root}: {existing} is not writable by this process")


def archive_phase(
    root: Path, name: str, storageclass: str, phase: str, text: str, result: ClientServerRun
) -> list[Path]:
    """Write one phase's files under `root`; the paths written, or ProbeFailure with the
    system's reason (nothing of the phase left) when a write fails."""
    written: list[Path] = []
    try:
        _write_phase(root, name, storageclass, phase, text, result, written)
    except OSError as exc:
        _remove(written)
        raise ProbeFailure(
            reason_for_errno(exc.errno, FailureReason.IO_ERROR),
            f"phase {phase}: its output could not be kept under {root}: "
            f"{exc.strerror or exc} ({exc.filename or root}); the phase's files were removed",
        ) from None
    return written


def _write_phase(
    root: Path,
    name: str,
    storageclass: str,
    phase: str,
    text: str,
    result: ClientServerRun,
    written: list[Path],
) -> None:
    """Write the phase's files, appending each path to `written` before its first byte."""
    whole = root / benchmark_folder(name, storageclass, ALL_SERVERS) / f"{phase}.json"
    _create(whole, document_text(text), written)
    for server in result.servers:
        folder = benchmark_folder(name, storageclass, server_folder_node(server.server))
        document = {
            key: value
            for key, value in result.document.items()
            if key in ("fio version", "timestamp", "timestamp_ms", "time")
        }
        options = result.document.get("global options")
        if isinstance(options, list):  # fio 3.43 and later: one object per server
            options = next(
                (item for item in options if isinstance(item, dict)
                 and (item.get("hostname"), item.get("port")) == (server.hostname, server.port)),
                None,
            )  # fmt: skip
        if isinstance(options, dict):
            document["global options"] = options
        document["fioprobe_split_from"] = f"{whole.parent.name}/{whole.name}"
        document["jobs"] = list(server.entries)
        _create(root / folder / f"{phase}.json", json.dumps(document, indent=2) + "\n", written)


def _create(path: Path, text: str, written: list[Path]) -> None:
    for folder in reversed([path.parent, *path.parent.parents]):
        if not folder.exists():
            folder.mkdir()
            written.append(folder)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise UsageError(f"{path} exists: an archive never overwrites a result") from None
    written.append(path)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def _remove(written: list[Path]) -> None:
    """Remove what a failed phase made, files first, then the folders it created."""
    for path in reversed(written):
        with contextlib.suppress(OSError):
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink()
