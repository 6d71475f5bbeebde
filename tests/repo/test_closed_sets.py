"""Failure reasons and volume types are closed sets with one home each in the package; every
doc, the mixin's configuration and the config check agree with that home.

Why: a reason that is documented but never produced (once `push_error`) sends an on-call
engineer looking for something that cannot happen; a reason produced but not documented has
no runbook. A volume type the exporter accepts but the mixin has no threshold for silently
falls back to the default one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from fioprobe.errors import FailureReason
from fioprobe.target.volumes import MODELS, VOLUME_TYPES, model
from support.paths import GO_JSONNET

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PUSHED = [reason.value for reason in FailureReason if reason.pushed]


def generated(name: str) -> dict[str, str]:
    """document -> the text of its generated part `name`."""
    pattern = re.compile(rf"<!-- {name}:begin[^>]*-->(.*?)<!-- {name}:end -->", re.S)
    return {
        str(path.relative_to(REPO)): match
        for path in DOCS
        for match in pattern.findall(path.read_text())
    }


def test_generated_parts_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generated_docs.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_failure_reasons_are_listed_where_an_operator_looks() -> None:
    parts = generated("failure-reasons")
    assert set(parts) == {"README.md", "docs/runbooks.md"}
    for text in parts.values():
        assert re.findall(r"`(\w+)`", text) == PUSHED


def test_faults_table_has_one_row_per_reason_and_no_other() -> None:
    faults = (REPO / "docs" / "FAULTS.md").read_text()
    table = faults.split("## Failure reasons", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert sorted(rows) == sorted(reason.value for reason in FailureReason)
    assert len(rows) == len(set(rows))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_no_doc_names_a_reason_that_is_never_produced(path: Path) -> None:
    text = path.read_text()
    assert "push_error" not in text
    for listed in re.findall(r"fioprobe_failure_reason_info\{reason=\"(\w+)\"", text):
        assert listed in PUSHED, f"{path.name}: {listed}"


def test_volume_types_are_listed_from_the_one_table() -> None:
    parts = generated("volume-types")
    assert set(parts) == {"README.md", "docs/MANIFESTS.md", "docs/DESIGN.md"}
    for text in parts.values():
        assert re.findall(r"`([\w-]+)`", text) == list(VOLUME_TYPES)


def test_every_volume_type_has_a_model() -> None:
    provisioned = {"size_bytes": 100 * 1024**3, "iops": 3000.0}
    for volume_type in VOLUME_TYPES:
        assert model(volume_type, **provisioned).type == volume_type
    assert list(MODELS) == list(VOLUME_TYPES)


def test_mixin_knows_every_volume_type_and_no_other() -> None:
    """Each type has its own latency threshold except `unknown` (the default applies); the
    non-bursting list names only types that exist."""
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", "(import 'mixin.libsonnet')._config"],
        capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    config = json.loads(result.stdout)
    thresholds = set(config["storageClassFsyncP99WarningSeconds"])
    assert thresholds == set(VOLUME_TYPES) - {"unknown"}
    assert set(config["burstNonBurstingVolumeTypes"]) <= set(VOLUME_TYPES)
    for volume_type in config["burstNonBurstingVolumeTypes"]:
        assert not model(volume_type, size_bytes=100 * 1024**3, iops=3000.0).bursts
