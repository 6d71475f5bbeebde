"""alerts/tests/observed.py: a promtool test gets every group its checks can read, and no
other, so the narrowed runs of the scenarios (every schedule, every mutation) give the whole
rule file's verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from observed import narrowed, observed_groups
from support.paths import REPO

RULES: list[dict[str, Any]] = [
    {"name": "records", "rules": [
        {"record": "a:x:sum", "expr": "sum by (node) (x_total)"},
        {"record": "a:y:sum", "expr": 'sum(y{node="a:x:sum"})'},
    ]},
    {"name": "more-records", "rules": [{"record": "b:z:max", "expr": "max(a:x:sum) > 0"}]},
    {"name": "unread", "rules": [{"record": "c:w:max", "expr": "max(w[5m])"}]},
    {"name": "alerts-a", "rules": [{"alert": "A", "expr": "b:z:max > 1"}]},
    {"name": "alerts-b", "rules": [
        {"alert": "B", "expr": 'c:w:max > 1 unless ALERTS{alertname="A"}'},
    ]},
    {"name": "alerts-c", "rules": [{"alert": "C", "expr": "vector(1)"}]},
]  # fmt: skip


def _tests(*, alerts: tuple[str, ...] = (), exprs: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [{
        "alert_rule_test": [{"eval_time": "1m", "alertname": a} for a in alerts],
        "promql_expr_test": [{"eval_time": "1m", "expr": e} for e in exprs],
    }]  # fmt: skip


@pytest.mark.parametrize(
    ("tests", "groups"),
    [
        # an alert, and the records it reads through another record
        (_tests(alerts=("A",)), {"alerts-a", "more-records", "records"}),
        # another alert's state read through ALERTS, and its records
        (_tests(alerts=("B",)), {"alerts-b", "unread", "alerts-a", "more-records", "records"}),
        # a record checked directly; a name inside a label value or string reads nothing
        (_tests(exprs=('a:y:sum{job="b:z:max"}',)), {"records"}),
        # the alerts a plain alternation names
        (_tests(exprs=('ALERTS{alertname=~"A|C"}',)), {"alerts-a", "alerts-c", "more-records",
                                                      "records"}),
        # an ALERTS selector whose alerts cannot be read plainly keeps every alerting group
        (_tests(exprs=('count(ALERTS{alertname=~"A.*"})',)),
         {"alerts-a", "alerts-b", "alerts-c", "unread", "more-records", "records"}),
        (_tests(exprs=("count(ALERTS)",)),
         {"alerts-a", "alerts-b", "alerts-c", "unread", "more-records", "records"}),
        # nothing named: nothing kept
        (_tests(exprs=("vector(1)",)), set()),
    ],
)  # fmt: skip
def test_observed_groups(tests: list[dict[str, Any]], groups: set[str]) -> None:
    assert observed_groups(RULES, tests) == groups


def test_narrowed_keeps_order_and_cuts_the_evaluation_order() -> None:
    document = {"group_eval_order": ["unread", "records", "more-records", "alerts-a"],
                "tests": _tests(alerts=("A",))}  # fmt: skip
    rules, test = narrowed({"groups": RULES}, document)
    assert [g["name"] for g in rules["groups"]] == ["records", "more-records", "alerts-a"]
    assert test["group_eval_order"] == ["records", "more-records", "alerts-a"]
    assert document["group_eval_order"][0] == "unread"  # the caller's document is untouched


@pytest.mark.parametrize("path", sorted((REPO / "alerts" / "tests").glob("*.yaml")),
                         ids=lambda p: p.stem)  # fmt: skip
def test_every_committed_test_keeps_the_groups_of_the_alerts_it_checks(path: Path) -> None:
    """On the shipped rules: every alert a committed test names keeps its group, and so does
    every recording group an alert it names reads (all of the mixin's alerts read the
    per-probe or per-stream records)."""
    document = yaml.safe_load(path.read_text())
    rules = [yaml.safe_load((path.parent / f).read_text()) for f in document["rule_files"]]
    groups = [g for r in rules for g in r["groups"]]
    kept = observed_groups(groups, document["tests"])
    named = {c["alertname"] for t in document["tests"] for c in t.get("alert_rule_test", [])}
    for name in named:
        assert any(g["name"] in kept for g in groups
                   if any(r.get("alert") == name for r in g["rules"])), name  # fmt: skip
    assert kept & {"fioprobe.rules", "fioprobe.continuous"}
