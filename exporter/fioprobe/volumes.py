"""Volume models: what a StorageClass's volumes promise, from AWS's EBS documentation.

The exporter turns a target's configured type and size (or provisioned values) into the
baseline/burst gauges, so dashboards can draw the lines the measured ceiling should meet and
alerts can tell "out of burst credits" from "slow". For a dedicated, persistent gp2 probe
volume whose only IO is the probe's own, the credit balance is modelled run by run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .collector import VolumeGauges

GIB = 1024**3
MIB = 1024**2
TIB = 1024**4

#: gp2 I/O credit bucket: 5.4 million credits, full at creation.
GP2_CREDIT_BUCKET = 5_400_000.0
GP2_BURST_IOPS = 3000.0
#: EBS counts each IO of up to 256 KiB as one credit; larger IOs as several.
CREDIT_IO_BYTES = 256 * 1024

VOLUME_TYPES = ("gp2", "gp3", "io1", "io2", "st1", "sc1", "ceph-rbd", "unknown")


@dataclass(frozen=True, slots=True)
class VolumeModel:
    type: str
    size_bytes: float | None
    baseline_iops: float | None
    burst_iops: float | None
    baseline_throughput: float | None
    burst_throughput: float | None

    @property
    def bursts(self) -> bool:
        return (
            self.burst_iops is not None
            and self.baseline_iops is not None
            and self.burst_iops > self.baseline_iops
        )

    @property
    def burst_duration_seconds(self) -> float | None:
        """How long a full gp2 bucket lasts at the burst rate (AWS's published table)."""
        if self.type != "gp2" or not self.bursts:
            return None
        return GP2_CREDIT_BUCKET / (GP2_BURST_IOPS - self.baseline_iops)

    def gauges(self, balance_ratio: float | None = None) -> VolumeGauges:
        return VolumeGauges(
            size_bytes=self.size_bytes,
            baseline_iops=self.baseline_iops,
            burst_iops=self.burst_iops,
            baseline_throughput_bytes_per_second=self.baseline_throughput,
            burst_throughput_bytes_per_second=self.burst_throughput,
            burst_balance_ratio=balance_ratio,
        )


def model(
    volume_type: str,
    size_bytes: float | None = None,
    iops: float | None = None,
    throughput_bytes_per_second: float | None = None,
) -> VolumeModel:
    """The model of one volume. `iops`/`throughput` are provisioned values (gp3, io1, io2)."""
    size_gib = size_bytes / GIB if size_bytes else None
    if volume_type == "gp2":
        if size_gib is None:
            raise ValueError("gp2 needs the volume size: its baseline is 3 IOPS per GiB")
        baseline = min(max(3.0 * size_gib, 100.0), 16000.0)
        burst = GP2_BURST_IOPS if size_gib < 1000 and baseline < GP2_BURST_IOPS else baseline
        # Throughput: 128 MiB/s up to 170 GiB, 250 MiB/s from 334 GiB; in between 250 MiB/s
        # only while burst credits last.
        base_tp = 250 * MIB if size_gib >= 334 else 128 * MIB
        burst_tp = 250 * MIB if size_gib > 170 else 128 * MIB
        return VolumeModel("gp2", size_bytes, baseline, burst, base_tp, burst_tp)
    if volume_type == "gp3":
        baseline = iops or 3000.0
        tp = throughput_bytes_per_second or 125 * MIB
        return VolumeModel("gp3", size_bytes, baseline, baseline, tp, tp)
    if volume_type in ("io1", "io2"):
        if not iops:
            raise ValueError(f"{volume_type} needs its provisioned iops")
        # Throughput scales with IOPS (256 KiB per IO) up to 1,000 MiB/s.
        tp = throughput_bytes_per_second or min(iops * CREDIT_IO_BYTES, 1000 * MIB)
        return VolumeModel(volume_type, size_bytes, iops, iops, tp, tp)
    if volume_type in ("st1", "sc1"):
        if size_bytes is None:
            raise ValueError(f"{volume_type} needs the volume size: its throughput is per TiB")
        per_tib_base, per_tib_burst, cap, max_iops = {
            "st1": (40, 250, 500, 500.0),
            "sc1": (12, 80, 250, 250.0),
        }[volume_type]
        tib = size_bytes / TIB
        base_tp = min(per_tib_base * tib, cap) * MIB
        burst_tp = min(per_tib_burst * tib, cap) * MIB
        return VolumeModel(volume_type, size_bytes, max_iops, max_iops, base_tp, burst_tp)
    if volume_type in ("ceph-rbd", "unknown"):
        # No bursting: latency follows cluster load. A configured QoS limit is the baseline.
        return VolumeModel(
            volume_type,
            size_bytes,
            iops,
            iops,
            throughput_bytes_per_second,
            throughput_bytes_per_second,
        )
    raise ValueError(f"unknown volume type {volume_type!r} (one of {', '.join(VOLUME_TYPES)})")


def credit_units(ios: int, io_bytes: int) -> float:
    """IOs as EBS counts them for credits: one per IO of up to 256 KiB."""
    return float(max(ios, math.ceil(io_bytes / CREDIT_IO_BYTES)))


def next_gp2_balance(
    volume: VolumeModel,
    balance: float | None,
    balance_at: float | None,
    run_started: float,
    run_seconds: float,
    run_credit_units: float,
) -> float:
    """The modelled credit balance after one run of a dedicated gp2 probe volume.

    Credits accrue at the baseline rate while the volume idles between runs (up to the
    bucket), and a run spends what it used above the baseline during its own runtime.
    """
    assert volume.baseline_iops is not None
    if balance is None or balance_at is None:
        balance = GP2_CREDIT_BUCKET  # full at creation
    else:
        idle = max(0.0, run_started - balance_at)
        balance = min(GP2_CREDIT_BUCKET, balance + volume.baseline_iops * idle)
    spent = run_credit_units - volume.baseline_iops * run_seconds  # negative: a net gain
    return min(GP2_CREDIT_BUCKET, max(0.0, balance - spent))
