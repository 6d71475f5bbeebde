"""The lean text writer of `fioprobe convert` writes exactly what prometheus_client writes.

`fioprobe.metrics.exposition.text_exposition` exists for speed only, so the reference is
prometheus_client's own `generate_latest` over the same collector: byte for byte, for every
good file of the fio corpus, with and without grouping labels, for failed runs and volume
gauges, and for label values that need escaping.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import corpus_files
from fioprobe.fio.parse import parse_file
from fioprobe.metrics.collector import ProbeCollector, ProbeOutcome, VolumeGauges
from fioprobe.metrics.exposition import text_exposition
from fioprobe.metrics.totals import GroupTotals, merge_run
from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

GROUPING = {"storageclass": "gp3", "profile": "etcd-fsync", "node": "ip-10-0-0-1"}


def both(collector: Collector) -> tuple[bytes, bytes]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return text_exposition(collector), generate_latest(registry)


def outcome_and_totals(path: Path, **outcome: object) -> tuple[ProbeOutcome, GroupTotals]:
    run = parse_file(path)
    totals = GroupTotals()
    merge_run(totals, run, success=True, finished_at=1_700_000_000.0)
    merge_run(totals, run, success=False, finished_at=1_700_000_100.0)
    return ProbeOutcome(run=run, success=True, duration_seconds=12.5, **outcome), totals


@pytest.mark.parametrize("path", corpus_files(negative=False), ids=lambda p: p.name)
def test_every_corpus_file_exposes_exactly_as_prometheus_client(path: Path) -> None:
    outcome, totals = outcome_and_totals(path)
    ours, reference = both(ProbeCollector(outcome, totals))
    assert ours == reference
    ours, reference = both(ProbeCollector(outcome, totals, GROUPING))
    assert ours == reference


def test_failures_volumes_and_large_values_expose_exactly() -> None:
    path = corpus_files(negative=False)[0]
    volume = VolumeGauges(
        size_bytes=16 * 2**40,  # large values: Go's exponent notation ("1.7592186044416e+13")
        baseline_iops=3000.0,
        burst_iops=float("inf"),
        baseline_throughput_bytes_per_second=125 * 2**20,
        burst_throughput_bytes_per_second=None,
        burst_balance_ratio=0.0,
    )
    outcome, totals = outcome_and_totals(path, volume=volume, volume_type="gp3")
    failed = ProbeOutcome(
        run=None, success=False, duration_seconds=0.0, failure_reason="timeout", volume=volume
    )
    for case in (outcome, failed):
        ours, reference = both(ProbeCollector(case, totals, GROUPING))
        assert ours == reference
        assert b"e+" in ours  # the exponent path was taken


@pytest.mark.parametrize(
    "value",
    ['quote"d', "back\\slash", "new\nline", "tab\tand ünïcödé ✓", "", "a=b,c}", "\\n literal"],
)
def test_label_values_are_escaped_like_prometheus_client(value: str) -> None:
    path = corpus_files(negative=False)[0]
    outcome, totals = outcome_and_totals(path, provisioner=value, ran_on_node=value)
    ours, reference = both(ProbeCollector(outcome, totals, {**GROUPING, "node": value}))
    assert ours == reference


class _Families(Collector):
    def __init__(self, *families: Metric) -> None:
        self.families = families

    def collect(self):  # type: ignore[no-untyped-def]
        return iter(self.families)


def test_special_values_and_help_escaping_expose_exactly() -> None:
    gauge = GaugeMetricFamily("fioprobe_x", 'help with \\ and\nnewline and "quotes"', labels=["a"])
    for index, value in enumerate(
        [float("nan"), float("-inf"), -1e9, 1e6, 999999.9, 1e22, 5e-324, 0.0, -0.0, 7, 2**70]
    ):
        gauge.add_metric([str(index)], value)
    gauge.add_metric(["stamped"], 1.0, timestamp=1_700_000_000.123)
    ours, reference = both(_Families(gauge))
    assert ours == reference


@pytest.mark.parametrize(
    ("family", "problem"),
    [
        (InfoMetricFamily("fioprobe_build", "h", value={"v": "1"}), "type 'info' is not supported"),
        (GaugeMetricFamily("fioprobe.dotted", "h", value=1), "'fioprobe.dotted' is not a plain"),
        (GaugeMetricFamily("fioprobe_x", "h", labels=["a-b"]), "'a-b' is not a plain"),
        (GaugeMetricFamily("fioprobe_x", "h", labels=["__x"]), "'__x' is not a plain"),
    ],
)
def test_names_it_would_have_to_escape_are_refused(family: Metric, problem: str) -> None:
    """Names outside the legacy set would come out differently: refused, never guessed."""
    if family.type == "gauge" and not family.samples:
        family.add_metric(["v"], 1.0)
    with pytest.raises(ValueError, match=problem):
        text_exposition(_Families(family))


def test_openmetrics_only_samples_are_refused() -> None:
    """generate_latest writes _created as a separate gauge family; this writer does not."""
    counter = CounterMetricFamily("fioprobe_runs", "h", labels=["a"])
    counter.add_metric(["x"], 1.0, created=1_700_000_000.0)
    with pytest.raises(ValueError, match="fioprobe_runs_created: OpenMetrics-only"):
        text_exposition(_Families(counter))
