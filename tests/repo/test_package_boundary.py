"""The fioprobe package is the product alone: it imports no test or benchmark code, and its
wheel (what `pip install` and the image get) carries none.

Why: test support (etcd launchers, fault injection, write loads) once lived in the package
and shipped in every image. pytest puts tests/ and bench/ on the import path, so an import
of them from the package would pass every test here and fail only for users: these checks
read the source and the built wheel instead of importing anything.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "exporter" / "fioprobe"
#: Top-level modules that exist only outside the package: tests/ and its test folders,
#: tests/support/, bench/ and the promtool scenario generator (alerts/tests/).
OUTSIDE = (
    {"tests", "bench", "support", "conftest", "scenarios"}
    | {p.stem for p in (REPO / "tests").glob("*.py")}
    | {p.stem for p in (REPO / "tests").glob("*/test_*.py")}
    | {p.stem for p in (REPO / "bench").glob("*.py")}
)


def imported_modules(path: Path) -> set[str]:
    """The top-level names of every absolute import in one source file, nested ones too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_package_imports_nothing_from_tests_or_bench() -> None:
    found = {
        str(path.relative_to(REPO)): sorted(imported_modules(path) & OUTSIDE)
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_scan_sees_an_import_of_test_support(tmp_path: Path) -> None:
    """The check above could pass by reading nothing; it sees every import form."""
    source = tmp_path / "module.py"
    source.write_text(
        "import os\n"
        "from support import services\n"
        "def later():\n"
        "    import fidelity\n"
        "    from tests.support.slowfs import slow_fs\n"
        "from . import relative\n"
    )
    assert imported_modules(source) & OUTSIDE == {"support", "fidelity", "tests"}


@pytest.mark.slow
def test_wheel_holds_the_package_and_no_test_support(tmp_path: Path) -> None:
    """Build the wheel as `pip install .` does, from a copy (a build writes build/ and
    *.egg-info next to the sources, which must not race with other test runs)."""
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copytree(
        REPO / "exporter",
        source / "exporter",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
         "--disable-pip-version-check", "--wheel-dir", str(tmp_path / "wheel"), str(source)],
        capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("fioprobe-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(n for n in names if n.endswith(".py"))
    expected = sorted(str(p.relative_to(REPO / "exporter")) for p in PACKAGE.rglob("*.py"))
    assert modules == expected
    assert "fioprobe/py.typed" in names
    assert {n.split("/")[0] for n in names} == {
        "fioprobe",
        f"{wheel.name.split('-py3')[0]}.dist-info",
    }
    support = {p.name for p in (REPO / "tests" / "support").glob("*.py")} - {"__init__.py"}
    assert [n for n in modules if n.rsplit("/", 1)[-1] in support] == []
    text = "".join(zipfile.ZipFile(wheel).read(n).decode() for n in modules)
    assert "class EtcdWriteLoad" not in text and "def etcd(" not in text
