"""No probe rule, alert or panel takes a distributed benchmark's group for a probe.

A benchmark is pushed once, as its own group (benchmark, storageclass; no profile), with
metric names of its own. But the Pushgateway adds `push_time_seconds` to every group, and
the probe rules read it: a benchmark pushed once would look like a probe that stopped
pushing (FioProbeStale). So every probe selector carries `benchmark=""`
(lib/util.libsonnet). Checked here on the committed rules with promtool itself: with only a
benchmark's series as input (as the Pushgateway exposes them), hours later, every alert stays
silent and every recorded series is empty; and on the text: no rule names a
`fioprobe_distributed_*` metric, and every `push_time_seconds` selector excludes benchmarks.
The dashboards' side is in the same spirit: only panels meant for benchmarks select them.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from fioprobe.metrics.table import METRICS
from support import lanes

pytestmark = pytest.mark.timeout(lanes.TEST_SECONDS)

RULES = REPO / "alerts" / "out" / "rules.yaml"
DASHBOARDS = REPO / "dashboards" / "out"
#: The labels a benchmark's series have in Prometheus (honor_labels keeps the pushed ones).
GROUP = 'job="fioprobe", benchmark="qualify-gp3", storageclass="gp3"'


def _rules() -> list[dict[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _benchmark_series() -> list[dict[str, str]]:
    """Every family a benchmark pushes, with one sample each, plus the Pushgateway's own."""
    series = [
        {"series": f"push_time_seconds{{{GROUP}}}", "values": "0x240"},
        {"series": f"push_failure_time_seconds{{{GROUP}}}", "values": "0x240"},
    ]
    for metric in METRICS:
        if not metric.name.startswith("fioprobe_distributed_"):
            continue
        labels = {"phase": "randread", "server": "10.0.0.1:8765"}
        extra = "".join(f', {name}="{labels.get(name, "x")}"' for name in metric.labels)
        for name in metric.series_names():
            summary = name == metric.name and metric.kind == "summary"
            quantile = ', quantile="0.99"' if summary else ""
            series.append({"series": f"{name}{{{GROUP}{extra}{quantile}}}", "values": "1x240"})
    return series


def test_a_benchmark_alone_raises_nothing_and_records_nothing(tmp_path: Path) -> None:
    rules = _rules()
    alerts = sorted({rule["alert"] for rule in rules if "alert" in rule})
    records = sorted({rule["record"] for rule in rules if "record" in rule})
    assert alerts and records
    evaluations = ["10m", "1h", "4h"]
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _benchmark_series(),
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": []}
                    for at in evaluations
                    for name in alerts
                ],
                "promql_expr_test": [
                    {"expr": record, "eval_time": at, "exp_samples": []}
                    for at in evaluations
                    for record in records
                ],
            }
        ],
    }
    path = tmp_path / "benchmark-only.yaml"
    path.write_text(json.dumps(test))
    done = subprocess.run(
        ["promtool", "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=lanes.RUN_SECONDS,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


#: The Pushgateway's own series as selected (not a recorded `probe:push_time_seconds:max`).
_SELECTOR = re.compile(r"(?<![:\w])(push_time_seconds|push_failure_time_seconds)(\{[^}]*\})?")


def test_rules_name_no_benchmark_metric_and_exclude_benchmark_groups() -> None:
    for rule in _rules():
        expr = rule["expr"]
        assert "fioprobe_distributed_" not in expr, rule.get("record") or rule.get("alert")
        for match in _SELECTOR.finditer(expr):
            assert match.group(2) and 'benchmark=""' in match.group(2), (
                rule.get("record") or rule.get("alert"),
                match.group(0),
            )


def _dashboard_exprs() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        panels = list(board.get("panels", []))
        while panels:
            panel = panels.pop()
            panels.extend(panel.get("panels", []))
            for target in panel.get("targets", []):
                found.append((path.name, panel.get("title", ""), target.get("expr", "")))
        for variable in board.get("templating", {}).get("list", []):
            query = variable.get("query")
            text = query.get("query", "") if isinstance(query, dict) else str(query or "")
            found.append((path.name, f"${variable.get('name')}", text))
    return found


def test_only_benchmark_panels_select_benchmarks() -> None:
    """A panel that reads fioprobe_distributed_* is a benchmark panel; every other panel's
    push_time_seconds selector excludes benchmark groups."""
    benchmark_panels = [item for item in _dashboard_exprs() if "fioprobe_distributed_" in item[2]]
    assert benchmark_panels, "a dashboard shows the last benchmark per StorageClass"
    for board, title, expr in _dashboard_exprs():
        if "fioprobe_distributed_" in expr:
            assert 'benchmark!=""' in expr, (board, title)
        for match in _SELECTOR.finditer(expr):
            assert match.group(2) and 'benchmark=""' in match.group(2), (board, title)
