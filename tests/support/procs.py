"""The processes of this machine as /proc lists them: what a test looks for by command line
(a daemon left behind, a probe to kill), also after the process that started them died."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def command_lines() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, argv) of every process whose command line can be read (kernel threads have
    none; a process gone meanwhile is skipped)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[-1] == b"":
            argv.pop()
        if argv:
            yield int(entry.name), argv
