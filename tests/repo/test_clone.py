"""A fresh clone of the repository collects and runs its tests with nothing beside it.

Why: the tests once read their fio inputs from a folder beside the checkout, which a
`git clone` does not have, so collection failed with FileNotFoundError everywhere but on
this machine.
The corpus now lives in tests/data/fio-corpus. This test clones the committed HEAD into
an otherwise empty directory (`<tmp>/empty/fioprobe`, nothing beside it)
and runs pytest there with the current interpreter (a clone has no .venv) and the clone's
own package first on the path. Only committed files are in the clone: that is the point,
it proves nothing uncommitted or outside the repository is needed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

#: Reads from outside the repository that the clone's tests, benchmarks and scripts must not
#: contain (this file is excluded: it names them).
#: Split so that this line is not itself a match.
OUTSIDE_READS = [r"\.\./" + "shared", r'/ *"' + 'shared"', r"\bREPO\.parent\b"]
#: The sanctioned exceptions: the setup's offline fallbacks for jsonnet-bundler (the mixin's
#: grafonnet, the kube-prometheus test's dependencies), the git mirror beside the repository,
#: used only when GitHub cannot be reached (never by a test).
VENDOR_SETUPS = ("scripts/setup.d/15-jsonnet-vendor.sh", "scripts/setup.d/16-kube-prometheus.sh")


def clean_env(clone: Path) -> dict[str, str]:
    """The environment for processes in the clone: its package first, no outer git/pytest state."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GIT_") and key not in {"PYTHONPATH", "PYTEST_ADDOPTS"}
    }
    env["PYTHONPATH"] = str(clone / "exporter")
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    empty = tmp_path_factory.mktemp("clone") / "empty"
    empty.mkdir()
    target = empty / "fioprobe"
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    subprocess.run(
        [git, "clone", "--no-local", "--quiet", str(REPO), str(target)],
        check=True,
        capture_output=True,
        timeout=180,
        env=env,
    )
    assert list(empty.iterdir()) == [target], "the clone must have nothing beside it"
    return target


def run_in(clone: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=clone,
        env=clean_env(clone),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_clone_imports_its_own_package(clone: Path) -> None:
    result = run_in(clone, "-c", "import fioprobe; print(fioprobe.__file__)", timeout=60)
    assert result.returncode == 0, result.stderr
    imported = Path(result.stdout.strip()).resolve()
    assert imported.is_relative_to(clone.resolve()), imported


def test_clone_has_no_reads_outside_the_repository(clone: Path) -> None:
    pattern = "|".join(OUTSIDE_READS)
    result = subprocess.run(
        ["git", "grep", "-n", "-E", pattern, "--", "tests", "bench", "scripts", "exporter",
         ":!tests/repo/test_clone.py", *(f":!{path}" for path in VENDOR_SETUPS)],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, f"reads outside the repository:\n{result.stdout}"


def test_clone_collects_tests(clone: Path) -> None:
    result = run_in(clone, "-m", "pytest", "--collect-only", "-q", timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    counts = re.findall(r"^(\d+) tests? collected\b", result.stdout, re.MULTILINE)
    assert counts, output[-5000:]
    assert int(counts[-1]) > 0


def test_clone_runs_the_corpus_tests(clone: Path) -> None:
    result = run_in(clone, "-m", "pytest", "tests/fio/test_corpus.py", "-q", "-x", timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert re.search(r"^\d+ passed\b", result.stdout, re.MULTILINE), output[-5000:]
