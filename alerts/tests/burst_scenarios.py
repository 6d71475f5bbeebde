"""Scenarios of alerts/burst.libsonnet: FioProbeBurstCreditsDepleted."""

from __future__ import annotations

from typing import Any

from scenario_builders import after_stale, burst_alert, check, runs, twins
from scenario_engine import SCRAPE_S, Probe, Run, Scenario, seen

BURST = "FioProbeBurstCreditsDepleted"


def burst_scenarios(i: int) -> list[Scenario]:
    """FioProbeBurstCreditsDepleted: three runs in a row at the baseline (`for` 2.5 intervals)."""
    n = 12
    samples = n * i * 2
    ok, depleted = Run(p99=None, write_iops=2950), Run(p99=None, write_iops=301)
    gp2: dict[str, Any] = {"volume_type": "gp2", "baseline_iops": 300.0, "burst_iops": 3000.0}
    small = Probe("gp2", "burst-ceiling", runs=runs((4, ok), (n - 4, depleted)), **gp2)
    other = Probe("gp2", "burst-ceiling", cluster="b", runs=runs((n, ok)), **gp2)
    quiet = [
        # gp2 of 1 TiB and more: a baseline of 3,072 (and up) at or above the 3,000 burst
        Probe(
            "gp2-large",
            "burst-ceiling",
            volume_type="gp2",
            baseline_iops=3072.0,
            burst_iops=3072.0,
            runs=runs((n, Run(p99=None, write_iops=3072))),
        ),
        # gp2 of 990 GiB: 2,970 baseline, 3,000 burst; fio's noise cannot tell them apart
        Probe(
            "gp2-990g",
            "burst-ceiling",
            volume_type="gp2",
            baseline_iops=2970.0,
            burst_iops=3000.0,
            runs=runs((n, Run(p99=None, write_iops=2971))),
        ),
        # provisioned or credit-free volumes, even with a volume model that claims a burst
        Probe(
            "gp3",
            "burst-ceiling",
            volume_type="gp3",
            baseline_iops=3000.0,
            burst_iops=16000.0,
            runs=runs((n, Run(p99=None, write_iops=3000))),
        ),
        Probe(
            "io2",
            "burst-ceiling",
            volume_type="io2",
            baseline_iops=1000.0,
            burst_iops=3000.0,
            runs=runs((n, Run(p99=None, write_iops=1000))),
        ),
        Probe(
            "ocs-storagecluster-ceph-rbd",
            "burst-ceiling",
            volume_type="ceph-rbd",
            baseline_iops=100.0,
            burst_iops=3000.0,
            runs=runs((n, Run(p99=None, write_iops=150))),
        ),
        # one throttled run, and two in a row, among bursting ones
        Probe("gp2-one", "burst-ceiling", runs=runs((4, ok), (1, depleted), (n - 5, ok)), **gp2),
        Probe("gp2-two", "burst-ceiling", runs=runs((4, ok), (2, depleted), (n - 6, ok)), **gp2),
        # depleted, then the runs fail: a failed run's IOPS mean nothing
        Probe(
            "gp2-failed",
            "burst-ceiling",
            runs=runs((2, depleted), (n - 2, Run(success=False, p99=None, reason="timeout"))),
            **gp2,
        ),
    ]
    removed = Probe("gp2", "burst-ceiling", runs=runs((6, depleted)), **gp2)
    removed_deleted = Probe(
        "gp2-deleted", "burst-ceiling", runs=runs((6, depleted)), deleted_at=7 * i * 2, **gp2
    )
    scenarios = [
        Scenario(
            "a small gp2 volume at its baseline fires from the third run in a row; gp2 >= 1 TiB, "
            "gp3, io2 and Ceph RBD never; one or two throttled runs never; failed runs never",
            i,
            [small, other, *quiet],
            samples,
            checks=[
                check(BURST, seen(i, 4, 150 * i - SCRAPE_S)),
                check(BURST, seen(i, 4, 150 * i), burst_alert(small, 301)),
                check(BURST, seen(i, 11), burst_alert(small, 301)),
            ],
        ),
        Scenario(
            "removed probes, depleted at their last run, with their group left behind or deleted: "
            "both stop once stale (FioProbeStale's business); a deleted group looks like one a "
            "Pushgateway restart lost, whose alert must go on",
            i,
            [removed, removed_deleted],
            samples,
            checks=[
                check(
                    BURST, seen(i, 5), burst_alert(removed, 301), burst_alert(removed_deleted, 301)
                ),
                check(
                    BURST, 7 * i * 60, burst_alert(removed, 301), burst_alert(removed_deleted, 301)
                ),
                check(
                    BURST,
                    after_stale(i, 5) - SCRAPE_S,
                    burst_alert(removed, 301),
                    burst_alert(removed_deleted, 301),
                ),
                check(BURST, after_stale(i, 5)),
                check(BURST, seen(i, 11)),
            ],
        ),
    ]
    return scenarios + twins(scenarios[0], [BURST], [5 * i * 2 + 6, 8 * i * 2 + 6])
