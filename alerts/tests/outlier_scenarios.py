"""Scenarios of alerts/outlier.libsonnet: FioProbeLatencyOutlier."""

from __future__ import annotations

from scenario_builders import FAST, check, outlier_alert, runs, twins
from scenario_engine import SCRAPE_S, Probe, Run, Scenario, seen

OUTLIER = "FioProbeLatencyOutlier"


def outlier_scenarios(i: int) -> list[Scenario]:
    """FioProbeLatencyOutlier: 3 runs at 3x the median of the StorageClass's other nodes."""
    n = 12
    samples = n * i * 2

    def node_probes(sc: str, p99s: list[list[Run | None]]) -> list[Probe]:
        # The last node pushes first, the others one, two, three scrapes later: after a
        # Pushgateway restart its siblings come back after it.
        last = len(p99s) - 1
        return [
            Probe(
                sc,
                "etcd-fsync",
                node=f"w{k + 1}",
                volume_type="gp3",
                runs=rs,
                push_offset=last - k,
            )
            for k, rs in enumerate(p99s)
        ]

    fast = runs((n, FAST))
    sick = runs((4, FAST), (n - 4, Run(p99=0.0074)))
    gp3 = node_probes("gp3", [fast, fast, fast, sick])
    quiet_fast, quiet_slow = Run(p99=0.0002), Run(p99=0.0008)
    quiet = runs((n, quiet_fast))
    never = [
        # 2.5 times the median
        *node_probes("gp3-mild", [fast, fast, fast, runs((4, FAST), (n - 4, Run(p99=0.0053)))]),
        # 4 times, but only 0.6 ms above: quiet disks stay quiet
        *node_probes(
            "local-quiet", [quiet, quiet, quiet, runs((4, quiet_fast), (n - 4, quiet_slow))]
        ),
        # two siblings: no median to speak of
        *node_probes("gp3-pair", [fast, runs((4, FAST), (n - 4, Run(p99=0.05)))]),
        # one slow run, two, among fast ones
        *node_probes(
            "gp3-short",
            [
                fast,
                fast,
                runs((4, FAST), (1, Run(p99=0.05)), (n - 5, FAST)),
                runs((4, FAST), (2, Run(p99=0.05)), (n - 6, FAST)),
            ],
        ),
    ]
    scenarios = [
        Scenario(
            "one node's disk at 3.5x the median of its StorageClass's other nodes fires at its "
            "third such run, with no history at all; 2.5x, a quiet disk 0.6 ms above its "
            "siblings, an outlier of two probes, and one or two slow runs never",
            i,
            [*gp3, *never],
            samples,
            checks=[
                check(OUTLIER, seen(i, 4, 150 * i - SCRAPE_S)),
                check(OUTLIER, seen(i, 4, 150 * i), outlier_alert(gp3[3], 0.0074 / 0.0021, 0.0074)),
                check(OUTLIER, seen(i, 11), outlier_alert(gp3[3], 0.0074 / 0.0021, 0.0074)),
            ],
        ),
    ]
    return [*scenarios, *twins(scenarios[0], [OUTLIER], [5 * i * 2 + 6, 8 * i * 2 + 6])]
