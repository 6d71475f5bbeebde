"""`fioprobe backfill`: fio results -> OpenMetrics with each run's time -> promtool blocks ->
a real Prometheus, which must give back the numbers `fioprobe report` shows.

What "the numbers the report shows" means for a cumulative histogram (docs/REPORT.md):
- per run: the live exporter's histograms are cumulative over a group's runs, so one run is
  the difference between the series at its own timestamp and at the previous run's. That
  difference equals the run's contract buckets exactly, and `histogram_quantile(0.99, ...)`
  over it equals the run's bucket estimate in report.json, to the last bit;
- per cell: `histogram_quantile(0.99, sum by (le) (...))` at a group's last run equals the
  report's "contract histogram, all runs merged" table;
- fio's exact p99 of a run is `fioprobe_last_<op>_latency_seconds{quantile="0.99"}` at that
  run's timestamp, and equals the report's table cell (a bucket estimate cannot: it is
  interpolated inside a bucket).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import CORPUS, fioprobe
from fioprobe.metrics.histogram import cumulative
from fioprobe.metrics.table import EXPORTED_OPS, LATENCY_BUCKETS_SECONDS
from support import services
from support.corpus import raw_document
from support.promql import single_value, values_by_label
from support.report import fio_jobs, fio_value

LE = [f"{le:g}" for le in LATENCY_BUCKETS_SECONDS] + ["+Inf"]
FSYNC = ["--ioengine=sync", "--rw=write", "--bs=2300", "--fdatasync=1", "--size=200k"]


def make_runs(root: Path, work: Path) -> None:
    """Real fio runs at distinct times: json+ (bins) on two nodes, plain json (percentiles)."""
    plan = [("fast", "n1", 3, "json+"), ("fast", "n2", 2, "json+"), ("slow", "n1", 3, "json")]
    for group, node, runs, fmt in plan:
        for index in range(1, runs + 1):
            out = root / f"bf_{group}-fio-{node}" / "etcd-fsync" / f"run-{index}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            (work / node).mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["fio", "--name=etcd-fsync", f"--directory={work / node}", *FSYNC,
                 f"--output-format={fmt}", f"--output={out}"],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict]:
    root = tmp_path_factory.mktemp("backfill-runs")
    make_runs(root, tmp_path_factory.mktemp("backfill-work"))
    paths = [str(root), str(CORPUS)]
    out = tmp_path_factory.mktemp("backfill-report")
    result = fioprobe("report", *paths, "-o", str(out), "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    return paths, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def blocks(inputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths, _ = inputs
    out = tmp_path_factory.mktemp("backfill-blocks")
    result = fioprobe("backfill", *paths, "-o", str(out))
    assert result.returncode == 0, result.stderr.decode()
    stderr = result.stderr.decode()
    for name in ("neg-fio2.10", "neg-windows"):  # listed, not fatal
        assert f"skipped {CORPUS}/{name}" in stderr
    return out


def series_key(entry: dict) -> tuple[str, str, str]:
    return entry["group"], entry["row"], entry["node"] or ""


def pushes(data: dict, op: str) -> dict[tuple, list[tuple[float, list[dict]]]]:
    """{series key: [(timestamp, entries at that millisecond)]} for entries with `op`."""
    by_key: dict[tuple, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for entry in data["entries"]:
        if "contract" in entry["ops"].get(op, {}):
            by_key[series_key(entry)][round(entry["timestamp"] * 1000)].append(entry)
    return {
        key: [(ms / 1000, stamps[ms]) for ms in sorted(stamps)] for key, stamps in by_key.items()
    }


def selector(group: str, row: str, node: str, **extra: str) -> str:
    labels = {"job": "fioprobe", "storageclass": group, "profile": row, "node": node, **extra}
    return "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+) (?P<ts>\S+)$")


def om_samples(text: str) -> dict[str, list[tuple[dict[str, str], float, float]]]:
    """{series name: [(labels, value, timestamp)]} from the OpenMetrics file, in file order.

    (prometheus_client's OpenMetrics parser drops later timestamps of a series, so it cannot
    read a backfill file; promtool and Prometheus read it in the slow test below.)
    """
    result = defaultdict(list)
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            assert line.startswith("# ") or not line, line
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match["labels"]))
        result[match["name"]].append((labels, float(match["value"]), float(match["ts"])))
    return result


def test_openmetrics_holds_cumulative_histograms_at_run_times(inputs, blocks: Path) -> None:
    _, data = inputs
    text = (blocks / "fioprobe-backfill.om").read_text()
    assert text.endswith("# EOF\n")
    # Each family once (OpenMetrics wants families contiguous), with its type.
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE)
    assert len(types) == len({name for name, _ in types})
    assert ("fioprobe_sync_latency_seconds", "histogram") in types
    assert ("fioprobe_runs", "counter") in types
    samples = om_samples(text)
    counts = defaultdict(dict)
    for labels, value, stamp in samples["fioprobe_sync_latency_seconds_count"]:
        key = (labels["storageclass"], labels["profile"], labels.get("node", ""))
        counts[key][round(stamp * 1000)] = value
    sync = pushes(data, "sync")
    assert {("fast", "etcd-fsync", "n1"), ("slow", "etcd-fsync", "n1")} <= set(sync)
    for key, runs in sync.items():
        total = 0
        for stamp, entries in runs:
            for entry in entries:
                # fio's own N, read independently from the file
                doc = raw_document(Path(entry["source"]))
                total += fio_jobs(doc)[entry["index"]]["sync"]["lat_ns"]["N"]
            assert counts[key][round(stamp * 1000)] == total, (key, stamp)
    # runs_total counts the runs of each series key up to each push, in time order.
    runs = [(v, t) for labels, v, t in samples["fioprobe_runs_total"]
            if labels["storageclass"] == "fast" and labels.get("node") == "n1"]  # fmt: skip
    assert [v for v, _ in runs] == [1.0, 2.0, 3.0]
    assert [t for _, t in runs] == sorted(t for _, t in runs)
    # Every series is in time order, no series has two values at one time.
    for name, rows in samples.items():
        seen: dict[tuple, float] = {}
        for labels, _, stamp in rows:
            key = tuple(sorted(labels.items()))
            assert stamp > seen.get(key, -1), (name, labels)
            seen[key] = stamp


@pytest.mark.slow
def test_prometheus_answers_with_the_report_numbers(inputs, blocks: Path, tmp_path: Path) -> None:
    _, data = inputs
    prometheus = services.prometheus(tmp_path / "prometheus", {})
    data_dir = tmp_path / "prometheus" / "data"
    data_dir.mkdir(parents=True)
    block_dirs = [p for p in blocks.iterdir() if (p / "meta.json").exists()]
    assert block_dirs
    for block in block_dirs:
        shutil.copytree(block, data_dir / block.name)
    # The corpus goes back to 2017: retention must reach that far (measured from the newest
    # block), or Prometheus deletes the old blocks at start.
    prometheus.command.append("--storage.tsdb.retention.time=100y")
    prometheus.start(timeout=60)
    try:
        checked = _check_against_report(prometheus.url, data)
    finally:
        prometheus.stop()
    assert checked["runs"] >= 20 and checked["diffs"] >= 5 and checked["cells"] >= 10, checked
    assert checked["old"] >= 1  # at least one run from years ago answered at its own time


def _check_against_report(url: str, data: dict) -> dict[str, int]:
    checked = {"runs": 0, "diffs": 0, "cells": 0, "old": 0}
    for op in EXPORTED_OPS:
        metric = f"fioprobe_{op}_latency_seconds"
        for (group, row, node), runs in pushes(data, op).items():
            sel = selector(group, row, node)
            previous: float | None = None
            for stamp, entries in runs:
                # The run's buckets: the cumulative series now minus at the previous run.
                want_counts = [0] * len(LE)
                for entry in entries:
                    counts = entry["ops"][op]["contract"]["counts"]
                    want_counts = [a + b for a, b in zip(want_counts, counts, strict=True)]
                now = values_by_label(url, f"{metric}_bucket{sel}", "le", stamp)
                before = (
                    values_by_label(url, f"{metric}_bucket{sel}", "le", previous)
                    if previous is not None
                    else dict.fromkeys(LE, 0.0)
                )
                got = [now[le] - before[le] for le in LE]
                assert got == [float(c) for c in cumulative(want_counts)], (group, row, stamp)
                # histogram_quantile over exactly this run equals the report's estimate.
                run_buckets = (
                    f"{metric}_bucket{sel} - {metric}_bucket{sel} @ {previous:.3f}"
                    if previous is not None
                    else f"{metric}_bucket{sel}"
                )
                quantile = single_value(url, f"histogram_quantile(0.99, {run_buckets})", stamp)
                if len(entries) == 1:
                    want = entries[0]["ops"][op]["contract"]["p99"]
                    assert quantile == want, (group, row, stamp, quantile, want)
                    # fio's exact p99 is the last-run summary at the same time.
                    exact = entries[0]["ops"][op].get("p99")
                    job = fio_jobs(raw_document(Path(entries[0]["source"])))[entries[0]["index"]]
                    if exact is not None and fio_value(job, op, "p99") is not None:
                        last = single_value(
                            url,
                            f"fioprobe_last_{op}_latency_seconds"
                            f"{selector(group, row, node, quantile='0.99')}",
                            stamp,
                        )
                        assert last == exact == fio_value(job, op, "p99"), (group, row, stamp)
                    checked["runs"] += 1
                    checked["old"] += stamp < 1.6e9
                checked["diffs"] += previous is not None
                previous = stamp
    # The report's merged cells: histogram_quantile over all runs and nodes of a cell, at
    # the cell's last run, as a dashboard panel computes it.
    for op in EXPORTED_OPS:
        table = data["tables"].get(f"contract-{op}-p99")
        if table is None:
            continue
        for row, cells in table["rows"].items():
            for group, cell in cells.items():
                stamps = [
                    e["timestamp"]
                    for e in data["entries"]
                    if e["row"] == row
                    and e["group"] == group
                    and "contract" in e["ops"].get(op, {})
                ]
                if max(stamps) - min(stamps) > 240:
                    continue  # older series would be outside the 5 min lookback
                sel = "{" + f"storageclass={json.dumps(group)},profile={json.dumps(row)}" + "}"
                query = (
                    f"histogram_quantile(0.99, sum by (le) "
                    f"(fioprobe_{op}_latency_seconds_bucket{sel}))"
                )
                got = single_value(url, query, max(stamps))
                assert got == cell["value"] or (math.isnan(got) and cell["value"] is None), (
                    op, row, group, got, cell["value"],
                )  # fmt: skip
                checked["cells"] += 1
    return checked


def test_backfill_usage_errors(tmp_path: Path) -> None:
    bad = fioprobe("backfill", str(CORPUS), "-o", str(tmp_path), "--label", "job=x")
    assert bad.returncode == 2 and b"set by fioprobe itself" in bad.stderr
    bad = fioprobe("backfill", str(CORPUS), "-o", str(tmp_path), "--label", "no-equals")
    assert bad.returncode == 2
    missing = fioprobe("backfill", str(CORPUS), "-o", str(tmp_path / "x"),
                       "--promtool", "/nonexistent/promtool")  # fmt: skip
    assert missing.returncode == 1 and b"not installed" in missing.stderr
    extra = fioprobe("backfill", str(CORPUS), "-o", str(tmp_path / "y"), "--label",
                     "cluster=lab", "--quiet")  # fmt: skip
    assert extra.returncode == 0, extra.stderr
    assert 'cluster="lab"' in (tmp_path / "y" / "fioprobe-backfill.om").read_text()
    again = fioprobe("backfill", str(CORPUS), "-o", str(tmp_path / "y"))
    assert again.returncode == 2 and b"already holds TSDB blocks" in again.stderr


SPAN_RUN = CORPUS / "fio3.36-randrw-psync-128k-no-global-options.json"
SPAN_LINE = (
    "fioprobe: backfilling 1 push from 2025-12-03 00:38:18 UTC to 2025-12-03 00:38:18 UTC: "
    "the Prometheus retention must reach back to the first"
)


@pytest.mark.parametrize("quiet", [False, True], ids=["default", "quiet"])
def test_quiet_hides_the_span_line_and_nothing_else_changes(tmp_path: Path, quiet: bool) -> None:
    """The span line is one of backfill's progress lines: --quiet hides it like the others,
    and the blocks are the same either way."""
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(SPAN_RUN), "-o", str(out), *(["--quiet"] if quiet else []))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stderr.decode().splitlines()
    if quiet:
        assert lines == []
    else:
        assert lines[0] == SPAN_LINE
        assert lines[1].startswith("fioprobe: 1 pushes of 1 series keys from 1 files, 1 blocks")
    assert len([p for p in out.iterdir() if (p / "meta.json").exists()]) == 1
