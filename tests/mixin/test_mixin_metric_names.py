"""Every metric the mixin's rules query must be one the exporter produces.

A renamed or mistyped metric in an alert does not fail anything at runtime: the selector
just matches nothing and the alert can never fire. So the names referenced by the rendered
rules (expressions, and the template queries in descriptions) are checked against the
exporter's own metric table, `fioprobe.metrics.table.exposed_series_names()`, and against a short,
documented list of metrics other software exports.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fioprobe.metrics.table import exposed_series_names
from support.paths import REPO
from support.promql import referenced_names

RULES = REPO / "alerts" / "out" / "rules.yaml"
#: The `fioprobe.expected` groups of the shipped deployment with its etcd nodes named, of one
#: with per-node probes and the node inventory, and of the shipped one as it is, its etcd nodes
#: found by role (manifests/rules.jsonnet).
EXPECTED = REPO / "alerts" / "out" / "expected.yaml"
EXPECTED_PER_NODE = REPO / "alerts" / "out" / "expected-per-node.yaml"
EXPECTED_ETCD_BY_ROLE = REPO / "alerts" / "out" / "expected-etcd-by-role.yaml"
#: ... and of the provisioning scenarios' deployment (provisioning groups, no probe).
EXPECTED_PROVISIONING = REPO / "alerts" / "out" / "expected-provisioning.yaml"

#: Metrics the rules may use that fioprobe does not produce, each with who exports it.
#: (None is used today; etcd's own fsync histogram is where a rule comparing the probe with
#: etcd would go: `etcd_disk_wal_fsync_duration_seconds_bucket`, scraped from etcd.)
EXTERNAL_SERIES: dict[str, str] = {
    "push_time_seconds": "the Pushgateway, per group: when the probe last pushed anything",
    "etcd_disk_wal_fsync_duration_seconds_bucket": "etcd, /metrics of every member",
    "kube_node_info": "kube-state-metrics: the per-node probes' node inventory (optional)",
    "kube_node_spec_taint": "kube-state-metrics: nodes the DaemonSet does not run on",
    "kube_node_role": "kube-state-metrics: the nodes that hold etcd, by role (optional)",
}

#: Inside descriptions only the Go-template query strings (in backquotes) contain PromQL.
_TEMPLATE_QUERY = re.compile(r"`([^`]*)`")


def rules(path: Path = RULES) -> list[dict[str, Any]]:
    """All rules of a committed rendered rule file."""
    groups = yaml.safe_load(path.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_extractor_finds_names_and_ignores_labels_and_strings() -> None:
    """The check below is only as good as this extraction, so pin it on a known expression."""
    series, records = referenced_names(
        'rate(fioprobe_bogus_total{profile="fioprobe_not_a_metric", fioprobe_env="x"}[5m])'
        " > on (storageclass) probe:fioprobe_sync_latency_seconds:p99 offset 1w"
    )
    # fioprobe_env is a label name, which a regex cannot tell from a metric: the rules must
    # not use label names with the fioprobe_ prefix, and this documents that limit.
    assert series == {"fioprobe_bogus_total", "fioprobe_env"}
    assert records == {"probe:fioprobe_sync_latency_seconds:p99"}
    assert "fioprobe_bogus_total" not in exposed_series_names()


@pytest.mark.parametrize(
    "path",
    [RULES, EXPECTED, EXPECTED_PER_NODE, EXPECTED_ETCD_BY_ROLE, EXPECTED_PROVISIONING],
    ids=lambda p: p.stem,
)
def test_rules_query_only_metrics_the_exporter_produces(path: Path) -> None:
    """Every fioprobe_* name in the rules is produced by the exporter (or is external), and
    every recording rule referenced is defined: in the mixin's rules or a deployment's
    `fioprobe.expected` group (the per-node one and the one by role define every record any
    deployment has)."""
    defined_records = {
        rule["record"]
        for p in (RULES, EXPECTED_PER_NODE, EXPECTED_ETCD_BY_ROLE, EXPECTED_PROVISIONING)
        for rule in rules(p)
        if "record" in rule
    }
    all_series: set[str] = set()
    for rule in rules(path):
        texts = [rule["expr"]]
        texts += _TEMPLATE_QUERY.findall(rule.get("annotations", {}).get("description", ""))
        for text in texts:
            series, records = referenced_names(text)
            unknown = series - exposed_series_names() - set(EXTERNAL_SERIES)
            assert not unknown, f"{rule.get('alert') or rule['record']} queries {unknown}"
            assert records <= defined_records, records - defined_records
            all_series |= series
    if path != RULES:
        return
    # Guard against an extraction that silently finds nothing.
    assert {
        "fioprobe_sync_latency_seconds_bucket",
        "fioprobe_write_latency_seconds_bucket",
        "fioprobe_read_latency_seconds_bucket",
        "fioprobe_write_iops",
        "fioprobe_volume_baseline_iops",
        "fioprobe_volume_burst_iops",
        "fioprobe_info",
        "fioprobe_success",
        "fioprobe_failure_reason_info",
        "fioprobe_runs_total",
        "fioprobe_last_sync_latency_seconds",
        "fioprobe_continuous_sync_latency_seconds_bucket",
        "fioprobe_continuous_sync_latency_seconds_count",
        "fioprobe_continuous_inflight_seconds",
        "fioprobe_continuous_stall_seconds_total",
        "fioprobe_continuous_info",
        "fioprobe_provision_success",
        "fioprobe_provision_runs_total",
        "fioprobe_provision_last_step_duration_seconds",
        "fioprobe_provision_info",
    } <= all_series
