"""Each latency fact has one home per language, and this file ties the homes together: the
10 ms etcd threshold (fioprobe.thresholds; the mixin's etcdFsyncP99WarningSeconds, which the
dashboards' red follows, and its stream objective, a key of its own that must be a bucket
boundary), the latency buckets (metrics/table.py;
lib/util.libsonnet's latencyBuckets) and the stream's stall threshold (fioprobe.thresholds;
the manifests' continuous.stallThresholdSeconds). A change of one side fails until both agree.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from conftest import REPO
from fioprobe import thresholds
from support.paths import GO_JSONNET


@pytest.fixture(scope="module")
def mixin_config() -> dict[str, object]:
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", "(import 'mixin.libsonnet')._config"],
        capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return json.loads(result.stdout)


def values_of(key: str, tree: object) -> Iterator[object]:
    """Every value of `key` anywhere in the configuration (the dashboards keep theirs in a
    nested object)."""
    if isinstance(tree, dict):
        for name, value in tree.items():
            if name == key:
                yield value
            yield from values_of(key, value)
    elif isinstance(tree, list):
        for item in tree:
            yield from values_of(key, item)


def jsonnet(code: str) -> object:
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", code],
        capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return json.loads(result.stdout)


def test_etcd_threshold_is_the_mixins(mixin_config: dict[str, object]) -> None:
    assert mixin_config["etcdFsyncP99WarningSeconds"] == thresholds.ETCD_FSYNC_P99_SECONDS
    # The stream's objective is a key of its own (it must be a bucket boundary, the per-run
    # threshold need not be), kept at the same 10 ms here; the dashboards' red follows.
    assert mixin_config["continuousEtcdObjectiveSeconds"] == thresholds.ETCD_FSYNC_P99_SECONDS
    assert set(values_of("latencyRedSeconds", mixin_config)) == {thresholds.ETCD_FSYNC_P99_SECONDS}
    moved = jsonnet(
        "(import 'mixin.libsonnet') + { _config+:: { etcdFsyncP99WarningSeconds: 0.0095 } }"
        " + { out: { red: $._config.dashboards.latencyRedSeconds } }"
    )
    assert moved == {"out": {"red": 0.0095}}


def test_latency_buckets_are_the_exporters() -> None:
    """The stream's objectives must be bucket boundaries (alerts/windows.libsonnet refuses
    others): the mixin's list of them is the exporter's."""
    from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS

    buckets = jsonnet("(import 'lib/util.libsonnet').latencyBuckets")
    assert isinstance(buckets, list) and tuple(buckets) == LATENCY_BUCKETS_SECONDS


def test_stall_threshold_is_the_manifests_and_the_commands() -> None:
    from fioprobe.cli.main import build_parser
    from fioprobe.continuous.stream import WriterSettings

    manifests = jsonnet("(import 'manifests/main.libsonnet')().config.continuous")
    assert isinstance(manifests, dict)
    assert manifests["stallThresholdSeconds"] == thresholds.STREAM_STALL_THRESHOLD_SECONDS
    args = build_parser().parse_args(["continuous", "--dir", "/x", "--storageclass", "y"])
    assert args.stall_threshold == thresholds.STREAM_STALL_THRESHOLD_SECONDS
    assert WriterSettings().stall_threshold_seconds == thresholds.STREAM_STALL_THRESHOLD_SECONDS


def test_yellow_threshold_is_the_dashboards(mixin_config: dict[str, object]) -> None:
    assert set(values_of("latencyYellowSeconds", mixin_config)) == {
        thresholds.LATENCY_YELLOW_SECONDS
    }


def test_report_and_cli_default_to_them() -> None:
    from fioprobe.cli.main import build_parser
    from fioprobe.report.build import ReportOptions

    options = ReportOptions()
    args = build_parser().parse_args(["report", "x", "-o", "out"])
    assert (options.warn_ms, options.crit_ms) == (args.warn_ms, args.crit_ms) == (5, 10)
