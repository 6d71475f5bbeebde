"""The provisioning probe's part of the mixin (alerts/provisioning.libsonnet): its steps are the
exporter's, its thresholds' table is checked as the other keys are, and the probes' rules never
read a provisioning group's push time. Its alerts' behaviour is alerts/tests/provisioning.yaml's
(promtool, tests/mixin/test_mixin.py)."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
import yaml
from fioprobe.provision.steps import Step
from support import lanes
from support.paths import GO_JSONNET, REPO

pytestmark = pytest.mark.timeout(lanes.TEST_SECONDS)

RULES = REPO / "alerts" / "out" / "rules.yaml"


def jsonnet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), *args],
        capture_output=True, text=True, timeout=lanes.RUN_SECONDS, check=False, cwd=REPO,
    )  # fmt: skip


def test_the_mixin_knows_the_exporters_steps_in_order() -> None:
    proc = jsonnet("-e", "(import 'lib/util.libsonnet').provisionSteps")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [step.value for step in Step]


def test_the_default_thresholds_cover_every_step() -> None:
    proc = jsonnet("-e", "(import 'config.libsonnet')._config.provisionStepWarningSeconds")
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert set(table["default"]) == {step.value for step in Step}
    # Each volume type's row lists only the steps where it differs from the default.
    for volume_type, row in table.items():
        for step, seconds in row.items():
            assert seconds > 0, (volume_type, step)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"provisionStepWarningSeconds": {"default": {"bound": 60}}},
            "provisionStepWarningSeconds.default must give every step a threshold",
        ),
        (
            {"provisionStepWarningSeconds+": {"gp4": {"bound": 60}}},
            "provisionStepWarningSeconds.gp4: unknown key, did you mean gp2?",
        ),
        (
            {"provisionStepWarningSeconds+": {"gp3+": {"attach": 60}}},
            "provisionStepWarningSeconds.gp3.attach: unknown key, did you mean attached?",
        ),
        (
            {"provisionStepWarningSeconds+": {"gp3+": {"attached": 0}}},
            "provisionStepWarningSeconds: every threshold must be a positive number of seconds",
        ),
        ({"provisionFailingRuns": 1}, "provisionFailingRuns = 1: this window would span fewer"),
        ({"provisionOfRuns": 1}, "provisionOfRuns (1) must be >= provisionFailingRuns (2)"),
        (
            {"provisionStaleAfterRuns": 80},
            "lostGroupMemory (1d) must be at least twice the provisioning stale threshold",
        ),
    ],
)
def test_bad_provisioning_keys_stop_the_rendering(config: dict[str, Any], message: str) -> None:
    value = json.dumps(config).replace(
        '"provisionStepWarningSeconds+":', "provisionStepWarningSeconds+:"
    )
    value = value.replace('"gp3+":', "gp3+:")
    code = f"local m = (import 'mixin.libsonnet') + {{ _config+:: {value} }}; m.prometheusAlerts"
    proc = jsonnet("-e", code)
    assert proc.returncode != 0
    assert "fioprobe mixin config: " + message in proc.stderr, proc.stderr


def test_a_type_row_overrides_only_its_steps() -> None:
    """gp3's row sets bound and attached; its other steps keep the default's thresholds."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    thresholds = {
        r["labels"]["step"]: r["expr"]
        for r in rules
        if r.get("record") == "provision:fioprobe_provision_step_duration_seconds:warning_threshold"
    }
    assert set(thresholds) == {step.value for step in Step}
    assert 'volume_type=~"gp2|gp3|io1|io2|sc1|st1"' in thresholds["attached"]
    assert "fioprobe_provision_info" not in thresholds["running"]
    assert thresholds["running"].startswith("120 * group by (cluster, storageclass, node)")


def test_probe_rules_never_read_a_provisioning_groups_push_time() -> None:
    """Every push_time_seconds selector of the probes' rules excludes groups without a
    profile (provisioning groups); no provisioning rule reads push_time_seconds at all."""
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    seen = 0
    for rule in rules:
        for selector in re.findall(r"(?<![\w:])push_time_seconds\{([^}]*)\}", rule["expr"]):
            seen += 1
            assert 'profile!=""' in selector or 'profile="' in selector, (rule, selector)
    assert seen >= 10
    provisioning = [
        r
        for g in yaml.safe_load(RULES.read_text())["groups"]
        if g["name"] == "fioprobe-provisioning"
        for r in g["rules"]
    ]
    assert provisioning
    assert not any(re.search(r"(?<![\w:])push_time_seconds\{", r["expr"]) for r in provisioning)
