"""Volume models against AWS's published EBS numbers (DESIGN.md, Volume models)."""

from __future__ import annotations

import pytest
from fioprobe.probe.credits import next_gp2_balance
from fioprobe.target.volumes import GIB, GP2_CREDIT_BUCKET, MIB, TIB, model


@pytest.mark.parametrize(
    ("size_gib", "baseline", "burst_seconds"),
    [
        (1, 100, 1862),
        (33.33, 100, 1862),
        (100, 300, 2000),
        (334, 1002, 2703),
        (750, 2250, 7200),
    ],
)
def test_gp2_table(size_gib: float, baseline: float, burst_seconds: int) -> None:
    volume = model("gp2", size_gib * GIB)
    assert volume.baseline_iops == pytest.approx(baseline, abs=0.01)
    assert volume.burst_iops == 3000
    assert round(volume.burst_duration_seconds) == burst_seconds


@pytest.mark.parametrize("size_gib", [1000, 2000, 5334, 16384])
def test_gp2_no_burst_from_1000_gib(size_gib: int) -> None:
    volume = model("gp2", size_gib * GIB)
    assert not volume.bursts
    assert volume.burst_iops == volume.baseline_iops == min(3 * size_gib, 16000)
    assert volume.burst_duration_seconds is None


@pytest.mark.parametrize(
    ("size_gib", "baseline_mib", "burst_mib"),
    [(100, 128, 128), (170, 128, 128), (200, 128, 250), (334, 250, 250), (1000, 250, 250)],
)
def test_gp2_throughput_by_size(size_gib: int, baseline_mib: int, burst_mib: int) -> None:
    volume = model("gp2", size_gib * GIB)
    assert volume.baseline_throughput == baseline_mib * MIB
    assert volume.burst_throughput == burst_mib * MIB


def test_gp3_includes_3000_iops_and_125_mib_without_burst() -> None:
    volume = model("gp3", 100 * GIB)
    assert (volume.baseline_iops, volume.burst_iops) == (3000, 3000)
    assert volume.baseline_throughput == volume.burst_throughput == 125 * MIB
    assert not volume.bursts
    provisioned = model("gp3", 100 * GIB, iops=6000, throughput_bytes_per_second=500 * MIB)
    assert provisioned.baseline_iops == 6000 and provisioned.burst_throughput == 500 * MIB


@pytest.mark.parametrize("kind", ["io1", "io2"])
def test_provisioned_iops_do_not_burst(kind: str) -> None:
    volume = model(kind, 500 * GIB, iops=10000)
    assert volume.baseline_iops == volume.burst_iops == 10000
    assert not volume.bursts
    with pytest.raises(ValueError, match="provisioned iops"):
        model(kind, 500 * GIB)


@pytest.mark.parametrize(
    ("kind", "size_tib", "base_mib", "burst_mib"),
    [("st1", 1, 40, 250), ("st1", 4, 160, 500), ("st1", 16, 500, 500),
     ("sc1", 1, 12, 80), ("sc1", 4, 48, 250)],
)  # fmt: skip
def test_hdd_throughput_buckets(kind: str, size_tib: int, base_mib: int, burst_mib: int) -> None:
    volume = model(kind, size_tib * TIB)
    assert volume.baseline_throughput == pytest.approx(base_mib * MIB)
    assert volume.burst_throughput == pytest.approx(burst_mib * MIB)


def test_ceph_rbd_has_no_burst() -> None:
    assert not model("ceph-rbd").bursts
    assert model("ceph-rbd").baseline_iops is None


def test_gp2_credit_balance_model() -> None:
    volume = model("gp2", 100 * GIB)  # baseline 300
    full = next_gp2_balance(volume, None, None, 1000.0, 4.0, 4 * 3000)
    # A 4 s run at 3,000 IOPS spends (3000 - 300) * 4 credits from a full bucket.
    assert full == GP2_CREDIT_BUCKET - 2700 * 4
    # Idle time earns the baseline rate back, capped at the bucket.
    assert next_gp2_balance(volume, full, 1004.0, 1040.0, 4.0, 0) == GP2_CREDIT_BUCKET
    # Running flat out for longer than the burst duration empties it.
    empty = next_gp2_balance(volume, full, 1004.0, 1004.0, 2100.0, 2100 * 3000)
    assert empty == 0.0
