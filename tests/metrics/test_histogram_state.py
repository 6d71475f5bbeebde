"""Histogram conversion and the cumulative state file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import CORPUS, fioprobe
from fioprobe.fio.model import Bins, LatencyStats
from fioprobe.metrics.histogram import (
    BUCKET_COUNT,
    counts_from_bins,
    counts_from_percentiles,
    cumulative,
)
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS
from fioprobe.metrics.totals import GroupTotals, HistogramTotals
from fioprobe.publish.state import STATE_VERSION, GroupState, load, save
from fioprobe.publish.statefile import StateDir, StateError

INDEX_10MS = LATENCY_BUCKETS_SECONDS.index(0.01)


def test_bins_go_to_the_first_bucket_at_or_above_them() -> None:
    counts = counts_from_bins(Bins([1, 10_000_000, 10_000_001, 9_000_000_000], [1, 3, 5, 2]))
    assert counts[INDEX_10MS] == 3  # exactly 10 ms is "at or below 10 ms"
    assert counts[INDEX_10MS + 1] == 5
    assert counts[0] == 1
    assert counts[-1] == 2  # above 8.192 s: +Inf only
    assert sum(counts) == 11


def test_bins_match_a_per_bin_reference_at_every_edge() -> None:
    """Bisection (which skips the empty buckets at both ends) against the obvious loop."""
    import random

    bounds = [round(le * 1e9) for le in LATENCY_BUCKETS_SECONDS]
    edges = sorted({1, *bounds, *(b - 1 for b in bounds), *(b + 1 for b in bounds), 10**12})
    rng = random.Random(7)
    for size in [1, 2, 3, 50, len(edges)] * 20:
        latencies = sorted(rng.sample(edges, min(size, len(edges))))
        values = [rng.randrange(0, 1000) for _ in latencies]
        expected = [0] * BUCKET_COUNT
        for latency, value in zip(latencies, values, strict=True):
            index = next((i for i, b in enumerate(bounds) if latency <= b), len(bounds))
            expected[index] += value
        assert counts_from_bins(Bins(latencies, values)) == expected, latencies
    assert counts_from_bins(Bins([], [])) == [0] * BUCKET_COUNT


def test_percentiles_give_monotone_counts_summing_to_n() -> None:
    latency = LatencyStats(
        min_s=0.0002, max_s=0.05, mean_s=0.003, stddev_s=0.001, samples=1000,
        percentiles={50.0: 0.0009, 90.0: 0.003, 99.0: 0.012, 99.9: 0.04},
        bins_ns=None,
    )  # fmt: skip
    counts = counts_from_percentiles(latency, 1000)
    running = cumulative(counts)
    assert running == sorted(running) and running[-1] == 1000
    # fio's point (p, v): the sample of rank ceil(p% x n) is in v's bin, so below that bin
    # there are at most rank - 1. The count above a bound is never overstated, and the p99
    # rank (990) is only reached in the bucket of fio's p99.
    assert running[LATENCY_BUCKETS_SECONDS.index(0.001)] == 899  # p50 0.9 ms, p90 3 ms
    assert running[INDEX_10MS] == 989  # p99 = 12 ms: at most 1.1% above 10 ms, not 10%
    assert running[LATENCY_BUCKETS_SECONDS.index(0.032)] == 998  # p99.9 = 40 ms
    assert running[LATENCY_BUCKETS_SECONDS.index(0.064)] == 1000  # max 50 ms


def test_a_point_whose_bin_straddles_a_bound_claims_nothing_above_it() -> None:
    """fio's p99 10.05 ms is the middle of a bin that starts below 10 ms: its sample may be
    at or below 10 ms, so only the next point bounds the count (fewer above, never more)."""
    latency = LatencyStats(
        min_s=0.0002, max_s=0.05, mean_s=0.003, stddev_s=0.001, samples=1000,
        percentiles={50.0: 0.0009, 99.0: 0.01005, 99.9: 0.04},
        bins_ns=None,
    )  # fmt: skip
    running = cumulative(counts_from_percentiles(latency, 1000))
    assert running[INDEX_10MS] == 998


def test_without_percentiles_no_bucket_is_invented() -> None:
    """clat_percentiles=0: only min, max, mean. One 12 ms outlier must not put every sample
    above 10 ms (which would fire the etcd alert); unless min and max share a bucket, the
    samples go into no bucket at all."""
    outlier = LatencyStats(min_s=0.00005, max_s=0.012, mean_s=0.00014, stddev_s=0.0005,
                           samples=455, percentiles={}, bins_ns=None)  # fmt: skip
    assert counts_from_percentiles(outlier, 455) is None
    narrow = LatencyStats(min_s=0.0011, max_s=0.0019, mean_s=0.0015, stddev_s=0.0001,
                          samples=10, percentiles={}, bins_ns=None)  # fmt: skip
    counts = counts_from_percentiles(narrow, 10)
    assert counts is not None and counts[LATENCY_BUCKETS_SECONDS.index(0.002)] == 10


def test_state_round_trip_and_atomic_save(tmp_path: Path) -> None:
    totals = GroupTotals(runs_total=3, failures_total=1, written_bytes_total=42)
    totals.histograms["sync"] = HistogramTotals([1] * BUCKET_COUNT, 0.5)
    group = GroupState(totals=totals, pending=GroupTotals(runs_total=1), last_push_at=5.0)
    file = StateDir(tmp_path).file("state.json")
    save(file, group)
    assert load(file) == group
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp file left


def test_a_temporary_left_by_a_writer_that_died_is_removed_by_the_next_write(
    tmp_path: Path,
) -> None:
    """A writer killed between creating its temporary and the rename (abandoned in a hung
    fsync, killed when the disk answered) leaves `.<name>.<pid>.<hex>.tmp`; the next write
    of that file removes it when that PID is gone, and leaves everything else alone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f".state.json.{dead.pid}.0123456789ab.tmp"
    live = tmp_path / f".state.json.{os.getppid()}.0123456789ab.tmp"  # a writer still alive
    other = tmp_path / f".other.json.{dead.pid}.0123456789ab.tmp"  # another file's
    odd = tmp_path / ".state.json.0.0123456789ab.tmp"  # not a writer's PID
    for path in (left, live, other, odd):
        path.write_text("{}")
    StateDir(tmp_path).file("state.json").write({"version": STATE_VERSION})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["state.json", live.name, other.name, odd.name]
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "state is corrupt (not JSON"),
        ("[]", "state is corrupt (not a JSON object)"),
        ('{"runs_total": 1}', "state is corrupt (no version)"),
        (json.dumps({"version": STATE_VERSION + 1}), "written by a newer fioprobe"),
        (json.dumps({"version": 1, "runs_total": -1}), "state is corrupt (runs_total is not"),
        (json.dumps({"version": 1, "histograms": {"sync": {"counts": [1], "sum_seconds": 0}}}),
         "state is corrupt (histogram 'sync' is malformed)"),
    ],
)  # fmt: skip
def test_bad_state_is_a_clear_error(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateError) as caught:
        load(StateDir(tmp_path).file("state.json"))
    assert str(caught.value).startswith(f"{path}: ") and problem in str(caught.value)


def test_push_with_a_newer_state_refuses_and_keeps_it(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    newer = json.dumps({"version": STATE_VERSION + 1, "runs_total": 7})
    state.write_text(newer)
    result = fioprobe("push", str(CORPUS / "fio3.36-seqread-numjobs2-group-reporting.json"),
                      "--gateway", "http://127.0.0.1:9", "--storageclass", "s", "--profile", "p",
                      "--state", str(state))  # fmt: skip
    assert result.returncode == 2
    assert "written by a newer fioprobe" in result.stderr.decode()
    assert state.read_text() == newer


def test_help_explains_every_option() -> None:
    for command in ("convert", "push", "probe", "run", "demo"):
        result = fioprobe(command, "--help")
        assert result.returncode == 0
        text = result.stdout.decode()
        options = [w for w in text.split() if w.startswith("--") and w != "--help"]
        assert options, command
    push_help = fioprobe("push", "--help").stdout.decode()
    assert "FIOPROBE_PUSHGATEWAY_PASSWORD" in push_help and "--password-file" in push_help
    assert "Exit status" in fioprobe("--help").stdout.decode()


def test_bins_in_any_order_all_count() -> None:
    """fio writes bins ascending; others may not."""
    from fioprobe.fio.parse import parse_text

    text = (
        '{"jobs": [{"jobname": "j", "write": {"total_ios": 6, "clat_ns": {"min": 1, "max": 2e7,'
        ' "mean": 5, "N": 6, "bins": {"20000000": 1, "1": 3, "10000000": 2}}}}]}'
    )
    bins = parse_text(text).jobs[0].ops["write"].latency.bins_ns
    assert bins.latencies_ns == [1, 10_000_000, 20_000_000]
    counts = counts_from_bins(bins)
    assert counts[0] == 3 and counts[INDEX_10MS] == 2 and counts[INDEX_10MS + 2] == 1
    assert sum(counts) == 6
