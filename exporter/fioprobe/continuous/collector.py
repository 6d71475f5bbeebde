"""prometheus_client Collector: every stream's state -> the fioprobe_continuous_* families.

This is where the stream's measurements become metrics; names, help texts and kinds come
from the one metric table (`fioprobe.metrics.table`), so a name that is not there cannot be
exported. Values are computed per scrape (`StreamState.snapshot`), so the in-flight age is
the age at the moment Prometheus asks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from fioprobe import __version__
from fioprobe.continuous.state import Snapshot, StreamState
from fioprobe.metrics.collector import etcd_disk_label
from fioprobe.metrics.histogram import LE_LABELS
from fioprobe.metrics.table import METRICS_BY_NAME


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """One target's identity and facts, and the state its writer keeps up to date."""

    storageclass: str
    directory: str
    state: StreamState
    node: str | None = None
    etcd_disk: bool = False
    volume_type: str = "unknown"
    ran_on_node: str = ""
    #: etcd's data directory: the writer checks the target directory is on its filesystem.
    etcd_data_dir: str | None = None

    @property
    def labels(self) -> dict[str, str]:
        """The stream's identity: the same storageclass/node labels as the pushed series."""
        labels = {"storageclass": self.storageclass}
        if self.node:
            labels["node"] = self.node
        return labels

    @property
    def name(self) -> str:
        return self.storageclass + (f" on {self.node}" if self.node else "")


class StreamCollector(Collector):
    def __init__(self, targets: Sequence[StreamTarget]) -> None:
        self.targets = tuple(targets)

    def collect(self) -> Iterator[Metric]:
        families = {name: _family(name) for name in METRICS_BY_NAME if "_continuous_" in name}
        for target in self.targets:
            _add(families, target, target.state.snapshot())
        yield from families.values()


def _family(name: str) -> Metric:
    definition = METRICS_BY_NAME[name]
    # Metric, not the typed *MetricFamily classes: a node-local target's samples carry
    # `node`, a StorageClass target's do not, in one family.
    # prometheus_client names a counter family without its _total suffix.
    family_name = name.removesuffix("_total") if definition.kind == "counter" else name
    return Metric(family_name, definition.help, definition.kind)


def _add(families: dict[str, Metric], target: StreamTarget, snap: Snapshot) -> None:
    labels = target.labels

    def put(name: str, value: float, extra: dict[str, str] | None = None,
            sample: str | None = None) -> None:  # fmt: skip
        families[name].add_sample(sample or name, {**labels, **(extra or {})}, value)

    histogram = "fioprobe_continuous_sync_latency_seconds"
    for le, count in zip(LE_LABELS, snap.buckets, strict=True):
        put(histogram, count, {"le": le}, histogram + "_bucket")
    put(histogram, snap.sync_count, sample=histogram + "_count")
    put(histogram, snap.sync_sum_seconds, sample=histogram + "_sum")
    put("fioprobe_continuous_inflight_seconds", snap.inflight_seconds)
    put("fioprobe_continuous_stall_seconds_total", snap.stall_seconds_total)
    put("fioprobe_continuous_operations_total", snap.operations_total)
    put("fioprobe_continuous_written_bytes_total", snap.written_bytes_total)
    for reason, count in sorted(snap.errors_total.items()):
        put("fioprobe_continuous_errors_total", count, {"reason": reason})
    put("fioprobe_continuous_success", 1.0 if snap.success else 0.0)
    # One series: the reason label is empty (absent) while the stream works.
    put(
        "fioprobe_continuous_failing_seconds",
        snap.failing_seconds,
        {"reason": snap.failing_reason} if snap.failing_reason else {},
    )
    device = snap.device
    put(
        "fioprobe_continuous_info",
        1.0,
        {
            # A target the writer found off etcd's filesystem claims no etcd disk.
            "etcd_disk": etcd_disk_label(target.etcd_disk and not snap.etcd_refused),
            "ran_on_node": target.ran_on_node,
            "volume_type": target.volume_type,
            "device": device.device if device else "",
            "disk": device.disk if device else "",
            "major_minor": device.major_minor if device else "",
            "version": __version__,
        },
    )
