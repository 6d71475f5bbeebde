"""The release workflow cannot run here; `make lint` checks it with actionlint and shellcheck
(scripts/lint-workflows.sh). The committed workflows pass, and each seeded copy with one kind of
mistake fails, so a checker that quietly skipped a part (shellcheck missing, an unknown input
ignored) would be noticed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

LINT = REPO / "scripts" / "lint-workflows.sh"
WORKFLOWS = REPO / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"


def lint(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LINT), str(directory)], capture_output=True, text=True, timeout=120
    )


def test_the_committed_workflows_are_clean() -> None:
    result = lint(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


#: (what, text replaced, its replacement, what actionlint says)
SEEDED = [
    (
        "an unquoted variable in a run step (shellcheck)",
        'helm package charts/fioprobe --version "$VERSION"',
        "helm package charts/fioprobe --version $VERSION",
        "SC2086",
    ),
    (
        "a step output that does not exist",
        "${{ steps.release.outputs.version }}",
        "${{ steps.relase.outputs.version }}",
        'property "relase" is not defined',
    ),
    (
        "an input the action does not take",
        "          platforms: linux/amd64,linux/arm64\n",
        "          platform: linux/amd64,linux/arm64\n",
        'input "platform" is not defined',
    ),
    (
        "an unknown trigger",
        "  push:\n    tags:",
        "  pushed:\n    tags:",
        'unknown Webhook event "pushed"',
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "said"), [s[1:] for s in SEEDED], ids=[s[0] for s in SEEDED]
)
def test_a_seeded_mistake_fails(old: str, new: str, said: str, tmp_path: Path) -> None:
    text = RELEASE.read_text()
    assert old in text, old
    copy = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, copy)
    (copy / RELEASE.name).write_text(text.replace(old, new, 1))
    result = lint(copy)
    assert result.returncode != 0, result.stdout
    assert said in result.stdout, result.stdout
