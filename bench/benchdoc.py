"""Shared by the benchmarks: write one section of docs/BENCHMARKS.md, keep the others."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"


def write_section(section: str, path: Path = BENCHMARKS) -> None:
    """Replace (or append) the section whose first line is `section`'s `## ` heading."""
    heading = section.splitlines()[0]
    if not heading.startswith("## "):
        raise ValueError(f"a section starts with a '## ' heading, not {heading!r}")
    existing = path.read_text() if path.exists() else "# Benchmarks\n"
    start = existing.find(heading + "\n")
    if start < 0:
        updated = existing.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        following = existing.find("\n## ", start + len(heading))
        rest = "" if following < 0 else "\n" + existing[following + 1 :]
        updated = existing[:start] + section.rstrip("\n") + "\n" + rest
    path.write_text(updated)
