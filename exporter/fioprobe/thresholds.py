"""The latency thresholds fioprobe's own outputs share with the monitoring mixin.

config.libsonnet is where alert thresholds are set. The report's cell colours, the demo's
verdict and the fidelity benchmark draw the same lines, but the probe image has no jsonnet
to read that file at run time, so the values are held here once, and
tests/repo/test_thresholds.py checks that they equal the mixin's defaults.
"""

from __future__ import annotations

#: etcd's documented requirement, WAL fsync p99 below 10 ms: the mixin's
#: `etcdFsyncP99WarningSeconds`, and where latency turns red in dashboards and reports.
ETCD_FSYNC_P99_SECONDS = 0.010

#: Where latency turns yellow in dashboards and reports (the mixin's `latencyYellowSeconds`):
#: half of etcd's budget spent by the disk alone.
LATENCY_YELLOW_SECONDS = 0.005

#: The continuous stream's default stall threshold (`--stall-threshold`, the manifests'
#: `continuous.stallThresholdSeconds`): an fdatasync outstanding longer than etcd's budget
#: counts as stalling.
STREAM_STALL_THRESHOLD_SECONDS = ETCD_FSYNC_P99_SECONDS
