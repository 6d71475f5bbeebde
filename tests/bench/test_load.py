"""Many probe groups pushing at once into one real Pushgateway scraped by real Prometheus.

A small version of bench/pushgateway_load.py (500 groups there, numbers in docs/SIZING.md):
50 groups (10 nodes x 5 profiles) push concurrently, two rounds. After each round every
group must be present with exactly the cumulative counts of the rounds so far, both in the
Pushgateway's API and in Prometheus; the measurements are only reported, never asserted.
"""

from __future__ import annotations

from pathlib import Path

import pushgateway_load
import pytest


@pytest.mark.slow
def test_fifty_groups_two_rounds(tmp_path: Path) -> None:
    result = pushgateway_load.run_load(
        tmp_path, nodes=10, profiles=5, rounds=2, workers=16, scrape_interval="1s"
    )
    assert result.groups == 50
    assert [r.number for r in result.rounds] == [1, 2]  # each checked inside run_load
    for measured in result.rounds:
        assert len(measured.latencies) == 50
        # Every group's families were scraped: at least its histogram (24 series) each.
        assert measured.scrape_samples >= 50 * 24
    print(pushgateway_load.report(result))
