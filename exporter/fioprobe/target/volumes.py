"""Volume models: what a StorageClass's volumes promise, from AWS's EBS documentation.

The exporter turns a target's configured type and size (or provisioned values) into the
baseline/burst gauges, so dashboards can draw the lines the measured ceiling should meet and
alerts can tell "out of burst credits" from "slow". For a dedicated, persistent gp2 probe
volume whose only IO is the probe's own, the credit balance is modelled run by run
(`fioprobe.probe.credits`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fioprobe.metrics.collector import VolumeGauges

GIB = 1024**3
MIB = 1024**2
TIB = 1024**4

#: gp2 I/O credit bucket: 5.4 million credits, full at creation.
GP2_CREDIT_BUCKET = 5_400_000.0
GP2_BURST_IOPS = 3000.0
#: EBS counts each IO of up to 256 KiB as one credit; larger IOs as several.
CREDIT_IO_BYTES = 256 * 1024


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
        if self.type != "gp2" or not self.bursts or self.baseline_iops is None:
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
    build = MODELS.get(volume_type)
    if build is None:
        raise ValueError(f"unknown volume type {volume_type!r} (one of {', '.join(VOLUME_TYPES)})")
    given = {"size": size_bytes, "iops": iops}
    for setting, why in NEEDS.get(volume_type, {}).items():
        if not given[setting]:
            raise ValueError(f"{volume_type} needs {why}")
    return build(volume_type, size_bytes, iops, throughput_bytes_per_second)


def _gp2(kind: str, size_bytes: float | None, iops: float | None, tp: float | None) -> VolumeModel:
    """3 IOPS per GiB (100..16,000), bursting to 3,000 below 1,000 GiB on credits."""
    assert size_bytes  # NEEDS
    size_gib = size_bytes / GIB
    baseline = min(max(3.0 * size_gib, 100.0), 16000.0)
    burst = GP2_BURST_IOPS if size_gib < 1000 and baseline < GP2_BURST_IOPS else baseline
    # Throughput: 128 MiB/s up to 170 GiB, 250 MiB/s from 334 GiB; in between 250 MiB/s
    # only while burst credits last.
    base_tp = 250 * MIB if size_gib >= 334 else 128 * MIB
    burst_tp = 250 * MIB if size_gib > 170 else 128 * MIB
    return VolumeModel(kind, size_bytes, baseline, burst, base_tp, burst_tp)


def _gp3(kind: str, size_bytes: float | None, iops: float | None, tp: float | None) -> VolumeModel:
    """3,000 IOPS and 125 MiB/s included, more when provisioned; no bursting."""
    baseline = iops or 3000.0
    throughput = tp or 125 * MIB
    return VolumeModel(kind, size_bytes, baseline, baseline, throughput, throughput)


def _provisioned_iops(
    kind: str, size_bytes: float | None, iops: float | None, tp: float | None
) -> VolumeModel:
    """io1/io2: the provisioned IOPS, no bursting; throughput 256 KiB per IO up to 1,000 MiB/s."""
    assert iops  # NEEDS
    throughput = tp or min(iops * CREDIT_IO_BYTES, 1000 * MIB)
    return VolumeModel(kind, size_bytes, iops, iops, throughput, throughput)


#: st1/sc1 throughput per TiB (baseline, burst, cap; MiB/s) and their IOPS ceiling.
_HDD = {"st1": (40, 250, 500, 500.0), "sc1": (12, 80, 250, 250.0)}


def _hdd(kind: str, size_bytes: float | None, iops: float | None, tp: float | None) -> VolumeModel:
    """st1/sc1: a throughput bucket that scales with size, capped per type."""
    assert size_bytes  # NEEDS
    per_tib_base, per_tib_burst, cap, max_iops = _HDD[kind]
    tib = size_bytes / TIB
    base_tp = min(per_tib_base * tib, cap) * MIB
    burst_tp = min(per_tib_burst * tib, cap) * MIB
    return VolumeModel(kind, size_bytes, max_iops, max_iops, base_tp, burst_tp)


def _no_burst(
    kind: str, size_bytes: float | None, iops: float | None, tp: float | None
) -> VolumeModel:
    """No bursting, latency follows cluster load: a configured QoS limit is the baseline."""
    return VolumeModel(kind, size_bytes, iops, iops, tp, tp)


#: The volume types fioprobe models, each with the function that models it: the one table
#: the configuration checks against and the docs' lists are generated from
#: (scripts/generated_docs.py). Adding a type: see CONTRIBUTING.md.
MODELS: dict[str, Callable[[str, float | None, float | None, float | None], VolumeModel]] = {
    "gp2": _gp2,
    "gp3": _gp3,
    "io1": _provisioned_iops,
    "io2": _provisioned_iops,
    "st1": _hdd,
    "sc1": _hdd,
    "ceph-rbd": _no_burst,
    "unknown": _no_burst,
}
VOLUME_TYPES: tuple[str, ...] = tuple(MODELS)

#: The settings a type cannot be modelled without ("size" or "iops"), each with why. The
#: configuration refuses the type without them; so do the manifests and the chart at install,
#: through the catalog generated from this table (scripts/catalog.py).
NEEDS: dict[str, dict[str, str]] = {
    "gp2": {"size": "the volume size: its baseline is 3 IOPS per GiB"},
    "io1": {"iops": "its provisioned iops"},
    "io2": {"iops": "its provisioned iops"},
    "st1": {"size": "the volume size: its throughput is per TiB"},
    "sc1": {"size": "the volume size: its throughput is per TiB"},
}
