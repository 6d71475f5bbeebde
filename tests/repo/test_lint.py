"""The rule linters of `make lint` (scripts/lint-mixin.sh: promtool, the rule files loaded
together, pint with .pint.hcl) pass on the committed rules and still fail on a seeded mistake.

Each seeded copy of alerts/out/ carries one mistake that no exception covers, so a
configuration that excepted too much (a check disabled for every rule, a set never checked)
would let it through. The tests run the very script `make lint` runs, on the copy.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import REPO

RULES_DIR = REPO / "alerts" / "out"
LINT = REPO / "scripts" / "lint-mixin.sh"

Groups = list[dict[str, Any]]


def lint(rules_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LINT), str(rules_dir)], capture_output=True, text=True, timeout=120
    )


def group(groups: Groups, name: str) -> dict[str, Any]:
    return next(g for g in groups if g["name"] == name)


def static_regexp(files: dict[str, Groups]) -> None:
    """A regexp matcher on a static string: pint's promql/regexp."""
    group(files["rules.yaml"], "fioprobe.rules")["rules"].append(
        {"record": "seeded:fioprobe_info:gp3", "expr": 'fioprobe_info{volume_type=~"gp3"}'}
    )


def cross_group_record(files: dict[str, Groups]) -> None:
    """A recording rule reading another group's record, not one of .pint.hcl's exceptions:
    pint's rule/dependency."""
    group(files["rules.yaml"], "fioprobe-burst")["rules"].append(
        {"record": "seeded:fioprobe_success:count", "expr": "count(probe:fioprobe_success:min)"}
    )


def repeated_group(files: dict[str, Groups]) -> None:
    """rules.yaml repeating the group of expected-per-node.yaml, loaded with it."""
    files["rules.yaml"].append(group(files["expected-per-node.yaml"], "fioprobe.expected"))


def bad_syntax(files: dict[str, Groups]) -> None:
    """A PromQL expression that does not parse: promtool and pint refuse it."""
    group(files["expected.yaml"], "fioprobe.expected")["rules"].append(
        {"alert": "FioProbeSeeded", "expr": "rate(fioprobe_runs_total[5m]) >"}
    )


def test_committed_rules_are_lint_clean() -> None:
    result = lint(RULES_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("seed", "finding"),
    [
        (static_regexp, "promql/regexp"),
        (cross_group_record, "rule/dependency"),
        (repeated_group, 'groupname: "fioprobe.expected" is repeated'),
        (bad_syntax, "promql/syntax"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_seeded_mistake_fails(
    tmp_path: Path, seed: Callable[[dict[str, Groups]], None], finding: str
) -> None:
    files = {
        path.name: yaml.safe_load(path.read_text())["groups"]
        for path in sorted(RULES_DIR.glob("*.yaml"))
    }
    seed(files)
    for name, groups in files.items():
        (tmp_path / name).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert finding in result.stdout
