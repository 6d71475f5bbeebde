"""The suite's order of long files (tests/conftest.py) names files that exist: a renamed or
moved file would silently fall back to the end, where a long file costs the most."""

from __future__ import annotations

from conftest import LONG_FILES_FIRST, REPO


def test_every_long_file_named_first_exists() -> None:
    assert [name for name in LONG_FILES_FIRST if not (REPO / name).is_file()] == []
    assert len(set(LONG_FILES_FIRST)) == len(LONG_FILES_FIRST)
