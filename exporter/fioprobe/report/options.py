"""What the user chose for a report: grouping, baseline, colour thresholds, title."""

from __future__ import annotations

from dataclasses import dataclass, field

from fioprobe.results.load import Grouping
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS, LATENCY_YELLOW_SECONDS


@dataclass(slots=True)
class ReportOptions:
    grouping: Grouping = field(default_factory=Grouping)
    baseline: str | None = None
    #: Latency cells turn yellow from this many ms and red from `crit_ms` (the dashboards').
    warn_ms: float = LATENCY_YELLOW_SECONDS * 1e3
    crit_ms: float = ETCD_FSYNC_P99_SECONDS * 1e3
    title: str = "fio results"
    #: A timeline "steps" where the medians before and after differ by at least this factor.
    step_ratio: float = 2.0
