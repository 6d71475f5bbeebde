"""Numbers for docs/MANIFESTS.md, recorded into the run's measurements (printed by `make e2e`):
the run time of each profile as the probes pushed it. Peak memory per pod comes from the
session's cgroup sampler (conftest.py)."""

from __future__ import annotations

from typing import Any

from conftest import Measurements, expected_groups, find_group, group_value


def test_record_run_time_per_profile(
    pushgateway_url: str, manifests: list[dict[str, Any]], measurements: Measurements
) -> None:
    recorded = 0
    for key in expected_groups(manifests):
        group = find_group(pushgateway_url, **key)
        assert group is not None, key
        duration = group_value(group, "fioprobe_duration_seconds")
        assert duration is not None and duration > 0, key
        label = ",".join(f"{k}={v}" for k, v in key.items())
        measurements.record(f"profile_run_seconds{{{label}}}", round(duration, 2))
        recorded += 1
    assert recorded >= 4
