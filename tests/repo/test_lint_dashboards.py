"""grafana/dashboard-linter --strict over every rendered dashboard (scripts/lint-dashboards.sh,
run by `make lint`, exclusions with their reasons in dashboards/.lint): the committed dashboards
pass, and a copy seeded with one mistake fails, for every rule the exclusions leave on. So an
exclusion that grew too wide (a rule excluded for every panel where only some were meant) is
noticed: its seeded mistake would pass.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

LINT = REPO / "scripts" / "lint-dashboards.sh"
OVERVIEW = REPO / "dashboards" / "out" / "fioprobe-overview.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
Dashboard = dict[str, Any]

#: The rules only the job/instance exclusions turn off whole (dashboards/.lint).
WHOLLY_EXCLUDED = {
    "template-job-rule",
    "template-instance-rule",
    "target-job-rule",
    "target-instance-rule",
}


def lint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LINT), *map(str, files)], capture_output=True, text=True, timeout=300
    )


def test_every_rendered_dashboard_is_lint_clean() -> None:
    result = lint()
    assert result.returncode == 0, result.stderr


def test_only_the_job_and_instance_rules_are_excluded_whole() -> None:
    """Every other exclusion names the dashboard (and panel) it is for, each with a reason."""
    config = yaml.safe_load((REPO / "dashboards" / ".lint").read_text())
    for rule, exclusion in config["exclusions"].items():
        assert exclusion.get("reason"), rule
        if rule not in WHOLLY_EXCLUDED:
            assert exclusion.get("entries"), f"{rule} is excluded whole"
            assert all(entry.get("dashboard") for entry in exclusion["entries"]), rule


def first_panel(dashboard: Dashboard, kind: str = "timeseries") -> dict[str, Any]:
    return next(p for p in dashboard["panels"] if p.get("type") == kind)


def variable(dashboard: Dashboard, name: str) -> dict[str, Any]:
    return next(v for v in dashboard["templating"]["list"] if v["name"] == name)


def new_panel(expr: str, **fields: Any) -> dict[str, Any]:
    """A panel as the dashboards build them: templated datasource, unit, title, description."""
    return {
        "type": "timeseries",
        "title": "seeded",
        "description": "A panel seeded by the test.",
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": "s"}, "overrides": []},
        "gridPos": {"h": 8, "w": 12, "x": 0, "y": 200},
        "id": 9999,
        "targets": [{"datasource": DATASOURCE, "expr": expr, "refId": "A"}],
        **fields,
    }


def no_unit(d: Dashboard) -> None:
    del first_panel(d)["fieldConfig"]["defaults"]["unit"]


def fixed_rate_range(d: Dashboard) -> None:
    d["panels"].append(
        new_panel('rate(fioprobe_continuous_stall_seconds_total{cluster=~"$cluster"}[5m])')
    )


def hard_coded_datasource(d: Dashboard) -> None:
    first_panel(d)["datasource"] = {"type": "prometheus", "uid": "prometheus"}


def editable(d: Dashboard) -> None:
    d["editable"] = True


def variable_not_refreshed_on_time_change(d: Dashboard) -> None:
    variable(d, "storageclass")["refresh"] = 1  # on dashboard load only


def no_datasource_variable(d: Dashboard) -> None:
    d["templating"]["list"] = [v for v in d["templating"]["list"] if v["type"] != "datasource"]


def no_description(d: Dashboard) -> None:
    first_panel(d)["description"] = ""


def no_targets(d: Dashboard) -> None:
    del first_panel(d)["targets"]


def invalid_promql(d: Dashboard) -> None:
    d["panels"].append(new_panel('sum by (node (fioprobe_success{cluster=~"$cluster"})'))


def counter_not_rated(d: Dashboard) -> None:
    # Without matchers: the rule compares the selector's text, matchers included, with the
    # suffix _total, so it sees no counter in `x_total{...}`. (One panel reads a counter
    # unrated on purpose, "Never succeeded": fioprobe_runs_total > 0, whether a probe ever ran;
    # dashboards/.lint says so for the day the rule sees it.)
    d["panels"].append(new_panel("sum(fioprobe_continuous_errors_total)"))


def variable_with_invalid_promql(d: Dashboard) -> None:
    variable(d, "node")["query"] = "label_values(fioprobe_success{, node)"
    variable(d, "node")["definition"] = "label_values(fioprobe_success{, node)"


#: (the rule that must fail, how the mistake is seeded into the overview dashboard)
SEEDED: list[tuple[str, Callable[[Dashboard], None]]] = [
    ("panel-units-rule", no_unit),
    ("target-rate-interval-rule", fixed_rate_range),
    ("panel-datasource-rule", hard_coded_datasource),
    ("uneditable-dashboard", editable),
    ("template-on-time-change-reload-rule", variable_not_refreshed_on_time_change),
    ("template-datasource-rule", no_datasource_variable),
    ("panel-title-description-rule", no_description),
    ("panel-no-targets-rule", no_targets),
    ("target-promql-rule", invalid_promql),
    ("target-counter-agg-rule", counter_not_rated),
    ("template-label-promql-rule", variable_with_invalid_promql),
]


def test_every_rule_left_on_has_a_seeded_mistake() -> None:
    """The rules the linter has, but the job/instance ones and Loki's (fioprobe has no Loki
    query), each have a case below."""
    listed = subprocess.run(
        [str(REPO / ".tools" / "bin" / "dashboard-linter"), "rules"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    rules = {line.split("`")[1] for line in listed.splitlines() if line.startswith("* `")}
    loki = {rule for rule in rules if "logql" in rule}
    assert rules - WHOLLY_EXCLUDED - loki == {rule for rule, _ in SEEDED}


@pytest.mark.parametrize(("rule", "seed"), SEEDED, ids=[rule for rule, _ in SEEDED])
def test_a_seeded_mistake_fails(
    rule: str, seed: Callable[[Dashboard], None], tmp_path: Path
) -> None:
    dashboard = copy.deepcopy(json.loads(OVERVIEW.read_text()))
    seed(dashboard)
    seeded = tmp_path / OVERVIEW.name
    seeded.write_text(json.dumps(dashboard))
    result = lint(seeded)
    assert result.returncode != 0, f"{rule}: the seeded mistake passed"
    # The message of that rule, not another's: each rule's own wording.
    assert WORDS[rule] in result.stderr, result.stderr


#: What each rule says about its mistake (dashboard-linter's messages).
WORDS = {
    "panel-units-rule": "has no or invalid units defined",
    "target-rate-interval-rule": "should use $__rate_interval",
    "panel-datasource-rule": "does not use a templated datasource",
    "uneditable-dashboard": "is editable",
    "template-on-time-change-reload-rule": "should be set to be refreshed 'On Time Range Change",
    "template-datasource-rule": "does not have a templated data source",
    "panel-title-description-rule": "has missing title or description",
    "panel-no-targets-rule": "has no targets",
    "target-promql-rule": "invalid PromQL query",
    "target-counter-agg-rule": "counter metric",
    "template-label-promql-rule": "invalid templated label",
}
