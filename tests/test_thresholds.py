"""fioprobe.thresholds holds the mixin's latency thresholds for the Python side; here they are
checked against the mixin's own configuration, so a change of one fails until both agree.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from conftest import REPO
from fioprobe import thresholds


@pytest.fixture(scope="module")
def mixin_config() -> dict[str, object]:
    result = subprocess.run(
        ["jsonnet", "-J", str(REPO), "-e", "(import 'mixin.libsonnet')._config"],
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


def test_etcd_threshold_is_the_mixins(mixin_config: dict[str, object]) -> None:
    assert mixin_config["etcdFsyncP99WarningSeconds"] == thresholds.ETCD_FSYNC_P99_SECONDS


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
