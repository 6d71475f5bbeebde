"""The rule groups a promtool test can observe, and a rule file narrowed to them.

Why: promtool evaluates every rule of every group at every step, whether or not a check of
the test reads it, and the mixin's groups are costly to evaluate over the long timelines
(a day of burn windows, a week of regression baseline). A test's verdict depends only on
the alerts and series it names and on what those read, transitively: the other groups
cannot change it. So the tests that run the scenarios many times (at every schedule, under
every mutation) hand promtool only those groups, in the same order, while the committed test
files keep loading the whole shipped rule file.

What counts as read: every metric name in a check's or a kept rule's expression, an alert's
name in an `alert_rule_test`, and the alerts an `ALERTS`/`ALERTS_FOR_STATE` selector names
(`alertname="X"` or a plain `alertname=~"X|Y"`; any other ALERTS selector keeps every
alerting group).
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ALERTS = re.compile(r"\bALERTS(?:_FOR_STATE)?\b(\{[^}]*\})?")
_ALERTNAME = re.compile(r'alertname\s*(=~?)\s*"([^"]*)"')
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Stands for every alert: an ALERTS selector whose alert names cannot be read plainly.
EVERY_ALERT = "*"


def _names_in(expr: str) -> set[str]:
    """Metric and alert names an expression reads (label values and strings left out)."""
    names: set[str] = set()
    for match in _ALERTS.finditer(expr):
        found = _ALERTNAME.search(match.group(1) or "")
        if found is None:
            names.add(EVERY_ALERT)
        elif found.group(1) == "=":
            names.add(found.group(2))
        else:
            alternatives = found.group(2).split("|")
            if all(_PLAIN.fullmatch(a) for a in alternatives):
                names.update(alternatives)
            else:
                names.add(EVERY_ALERT)
    without_strings = _STRING.sub('""', expr)
    without_labels = re.sub(r"\{[^}]*\}", "", without_strings)
    return names | set(_NAME.findall(without_labels))


def _read_by_tests(tests: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for test in tests:
        for case in test.get("alert_rule_test", []):
            names.add(case["alertname"])
        for case in test.get("promql_expr_test", []):
            names |= _names_in(case["expr"])
    return names


def observed_groups(rule_groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> set[str]:
    """The names of the groups whose rules the tests' checks read, directly or through
    other rules."""
    defines: dict[str, set[str]] = {}
    for group in rule_groups:
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            defines.setdefault(name, set()).add(group["name"])
    alerting = {g["name"] for g in rule_groups if any("alert" in r for r in g["rules"])}
    kept: set[str] = set()
    wanted = _read_by_tests(tests)
    seen: set[str] = set()
    while wanted - seen:
        name = (wanted - seen).pop()
        seen.add(name)
        groups = alerting if name == EVERY_ALERT else defines.get(name, set())
        for group in groups - kept:
            kept.add(group)
            for rule in next(g for g in rule_groups if g["name"] == group)["rules"]:
                wanted |= _names_in(rule["expr"])
    return kept


def narrowed(rules: dict[str, Any], document: dict[str, Any]) -> tuple[dict, dict]:
    """`rules` (a rule file) with only the groups `document` (a promtool test file) can
    observe, and `document` with its group_eval_order cut to those groups."""
    kept = observed_groups(rules["groups"], document["tests"])
    groups = [g for g in rules["groups"] if g["name"] in kept]
    order = [name for name in document.get("group_eval_order", []) if name in kept]
    test = {**document, **({"group_eval_order": order} if "group_eval_order" in document else {})}
    return {**rules, "groups": groups}, test
