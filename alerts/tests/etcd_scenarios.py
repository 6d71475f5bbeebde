"""Scenarios of alerts/etcd.libsonnet: FioProbeEtcdFsyncLatencyHigh and
FioProbeStorageClassLatencyHigh, each sustained and intermittent."""

from __future__ import annotations

from typing import Any

from scenario_builders import (
    FAST,
    after_stale,
    check,
    etcd_alert,
    etcd_probe,
    firing_throughout,
    intermittent_alert,
    runs,
    sc_alert,
    twins,
)
from scenario_engine import SCRAPE_S, Probe, Run, Scenario, seen

ETCD = "FioProbeEtcdFsyncLatencyHigh"


def etcd_scenarios(i: int) -> list[Scenario]:
    """FioProbeEtcdFsyncLatencyHigh, 2 of the last 3 runs. Bad runs start at slot 4."""
    slow, very_slow, under = Run(p99=0.015), Run(p99=0.048), Run(p99=0.0098)
    n = 12
    samples = n * i * 2
    sustained = etcd_probe("control-plane-0", runs((4, FAST), (n - 4, slow)))
    critical = etcd_probe("control-plane-1", runs((4, FAST), (n - 4, very_slow)), openshift=True)
    clustered = etcd_probe("control-plane-2", runs((4, FAST), (n - 4, slow)), cluster="a")
    cp0, cp1 = etcd_probe("control-plane-0", []), etcd_probe("control-plane-1", [])
    scenarios = [
        Scenario(
            "sustained slow fsync on etcd disks: warning from the second slow run, critical "
            "above 32 ms; OpenShift's exported_job; clusters kept apart",
            i,
            [
                sustained,
                critical,
                clustered,
                etcd_probe("control-plane-2", runs((n, FAST)), cluster="b"),
            ],
            samples,
            checks=[
                check(ETCD, seen(i, 5, -SCRAPE_S)),
                check(
                    ETCD,
                    seen(i, 5),
                    etcd_alert(sustained, "warning", 2, 0.015),
                    etcd_alert(critical, "warning", 2, 0.048),
                    etcd_alert(critical, "critical", 2, 0.048),
                    etcd_alert(clustered, "warning", 2, 0.015),
                ),
                check(
                    ETCD,
                    seen(i, 9),
                    etcd_alert(sustained, "warning", 3, 0.015),
                    etcd_alert(critical, "warning", 3, 0.048),
                    etcd_alert(critical, "critical", 3, 0.048),
                    etcd_alert(clustered, "warning", 3, 0.015),
                ),
            ],
        ),
        Scenario(
            "one slow run (every fsync in (10, 16] ms, p99 15 ms; or in (32, 64] ms, p99 48 ms) "
            "among fast ones never fires; p99 just under 10 ms (every fsync in (8, 10] ms) "
            "never fires; a StorageClass volume running the same profile is no etcd disk",
            i,
            [
                etcd_probe("control-plane-0", runs((4, FAST), (1, slow), (n - 5, FAST))),
                etcd_probe("control-plane-1", runs((4, FAST), (1, very_slow), (n - 5, FAST))),
                etcd_probe("control-plane-2", runs((n, under))),
                Probe("gp2", "etcd-fsync", volume_type="gp2", runs=runs((n, very_slow))),
            ],
            samples,
            checks=[
                check(ETCD, seen(i, slot, after)) for slot in (4, 5, 6, 7, 11) for after in (0, 120)
            ],
        ),
        Scenario(
            "two slow runs out of three (slow, fast, slow) fire; a probe that stops after slow "
            "runs (its group left behind) stops firing, at the latest once its data is stale",
            i,
            [
                etcd_probe(
                    "control-plane-0",
                    runs((4, FAST), (1, slow), (1, FAST), (1, slow), (n - 7, FAST)),
                ),
                etcd_probe("control-plane-1", runs((4, FAST), (3, slow))),
            ],
            samples,
            checks=[
                check(ETCD, seen(i, 6, -SCRAPE_S), etcd_alert(cp1, "warning", 2, 0.015)),
                check(
                    ETCD,
                    seen(i, 6),
                    etcd_alert(cp0, "warning", 2, 0.015),
                    etcd_alert(cp1, "warning", 3, 0.015),
                ),
                check(ETCD, after_stale(i, 6)),
                check(ETCD, seen(i, 11)),
            ],
        ),
        Scenario(
            "a Pushgateway restart without persistence (new pod, every series gone until the "
            "next push) while an etcd disk is slow: the alert stays, no second one; nothing on "
            "a fast disk",
            i,
            [
                etcd_probe("control-plane-0", runs((4, FAST), (n - 4, slow))),
                etcd_probe("control-plane-1", runs((n, FAST))),
            ],
            samples,
            gateway_restarts=[10 * i + 6],
            checks=[
                # The last run's p99 is carried through the gap: the description still has it.
                check(ETCD, seen(i, 5, 6 * SCRAPE_S), etcd_alert(cp0, "warning", 2, 0.015)),
                check(ETCD, seen(i, 6), etcd_alert(cp0, "warning", 3, 0.015)),
                check(ETCD, seen(i, 8), etcd_alert(cp0, "warning", 3, 0.015)),
            ],
        ),
    ]
    return [
        *scenarios,
        intermittent_etcd_scenario(i),
        alternating_scenario(i),
        *twins(scenarios[0], [ETCD], [4 * i * 2 + 6, 7 * i * 2 + 6]),
    ]


#: Six hours of runs at a 5-minute schedule (as many runs at the others).
INTERMITTENT_RUNS = 72


def every(k: int, slow: Run, n: int = INTERMITTENT_RUNS) -> list[Run | None]:
    """Fast runs, and `slow` every k-th run (slots k-1, 2k-1, ...)."""
    return [slow if slot % k == k - 1 else FAST for slot in range(n)]


def no_sustained_alert(alertname: str, samples: int) -> dict[str, Any]:
    """promql_expr_test: the sustained rule (no pattern label) never fired nor was pending."""
    end = samples * SCRAPE_S
    return {
        "expr": f'count_over_time(ALERTS{{alertname="{alertname}", pattern=""}}[{end}s])',
        "eval_time": f"{end}s",
        "exp_samples": [],
    }


def intermittent_etcd_scenario(i: int) -> Scenario:
    """Slow every third run for six hours: never 2 of 3, a warning at the sixth slow run."""
    slow = Run(p99=0.015)
    third = etcd_probe("control-plane-0", every(3, slow))
    fifth = etcd_probe("control-plane-1", every(5, slow))
    samples = INTERMITTENT_RUNS * i * 2
    consequence = (
        "etcd on this disk stalls its commits every so often; expect slow API requests at those "
        "times."
    )
    return Scenario(
        "latency slow in every third run for six hours (never 2 of the last 3) warns, "
        'pattern="intermittent", at its sixth slow run (85 minutes at a 5-minute schedule); '
        "slow in every fifth run never does; the sustained rule never fires",
        i,
        [third, fifth],
        samples,
        checks=[
            check(ETCD, seen(i, 17, -SCRAPE_S)),
            check(ETCD, seen(i, 17), intermittent_alert(third, 6, "10ms", 0.015, consequence)),
            check(ETCD, seen(i, 41), intermittent_alert(third, 8, "10ms", 0.015, consequence)),
            check(ETCD, seen(i, 70), intermittent_alert(third, 8, "10ms", 0.0021, consequence)),
        ],
        expr_checks=[no_sustained_alert(ETCD, samples)],
    )


def alternating_scenario(i: int) -> Scenario:
    """An etcd disk alternating very slow and failed runs pages once, until two healthy runs."""
    very_slow = Run(p99=0.048)
    fail = Run(success=False, p99=None, reason="timeout")
    p = etcd_probe("control-plane-0", runs((4, FAST), *[(1, very_slow), (1, fail)] * 4, (4, FAST)))
    start, end = int(seen(i, 6)[:-1]), int(seen(i, 13, -SCRAPE_S)[:-1])
    both = [
        ("warning", "severity", 2, 0.048),
        ("critical", "severity", 2, 0.048),
    ]
    return Scenario(
        "an etcd disk alternating very slow (48 ms) and failed runs pages once, from its "
        "second slow run, and stays firing through the failed runs and the first healthy one "
        "($value 0 while held) until two healthy runs in a row",
        i,
        [p],
        16 * i * 2,
        checks=[
            check(ETCD, seen(i, 6, -SCRAPE_S)),
            check(ETCD, seen(i, 6), *(etcd_alert(p, sev, n, v) for sev, _, n, v in both)),
            check(ETCD, seen(i, 7), *(etcd_alert(p, sev, 0, None, held=True) for sev, *_ in both)),
            check(ETCD, seen(i, 10), *(etcd_alert(p, sev, n, v) for sev, _, n, v in both)),
            check(
                ETCD, seen(i, 12), *(etcd_alert(p, sev, 0, 0.0021, held=True) for sev, *_ in both)
            ),
            check(ETCD, end, *(etcd_alert(p, sev, 0, 0.0021, held=True) for sev, *_ in both)),
            check(ETCD, seen(i, 13)),
        ],
        expr_checks=[
            firing_throughout(
                ETCD,
                f'node="control-plane-0", profile="etcd-fsync", severity="{sev}", '
                'storageclass="etcd-disk"',
                start,
                end,
            )
            for sev, *_ in both
        ],
    )


SC = "FioProbeStorageClassLatencyHigh"


def storageclass_scenarios(i: int) -> list[Scenario]:
    """FioProbeStorageClassLatencyHigh: 3 of the last 4 runs above the volume type's threshold."""
    n = 12
    samples = n * i * 2
    io2 = Probe(
        "io2-fast", "etcd-fsync", volume_type="io2", runs=runs((4, FAST), (n - 4, Run(p99=0.006)))
    )
    sc1 = Probe(
        "sc1-cold", "etcd-fsync", volume_type="sc1", runs=runs((4, FAST), (n - 4, Run(p99=0.3)))
    )
    unknown = Probe(
        "local-path", "etcd-fsync", cluster="a", runs=runs((4, FAST), (n - 4, Run(p99=0.07)))
    )
    quiet = [
        # 6 ms would fire on io2 but is well within what an sc1 (256 ms) or gp3 (20 ms) promises.
        Probe("sc1-ok", "etcd-fsync", volume_type="sc1", runs=runs((n, Run(p99=0.006)))),
        Probe("gp3", "etcd-fsync", volume_type="gp3", runs=runs((n, Run(p99=0.012)))),
        # two slow runs out of four: not sustained enough for a warning about a StorageClass
        Probe(
            "gp2",
            "etcd-fsync",
            volume_type="gp2",
            runs=runs((4, FAST), (2, Run(p99=0.05)), (n - 6, FAST)),
        ),
        # an etcd disk (node-local): FioProbeEtcdFsyncLatencyHigh's business, not this alert's
        etcd_probe("control-plane-0", runs((n, Run(p99=0.3)))),
    ]

    # Per-node probes of a worker's volumes carry `node` like the etcd disks' probes; only the
    # published role (etcd_disk) makes a disk an etcd disk.
    def worker(sc: str, node: str, p99: float, **kw: Any) -> Probe:
        """A worker's gp3 volume, slow from the fifth run on."""
        slow_from_5 = runs((4, FAST), (n - 4, Run(p99=p99)))
        return Probe(sc, "etcd-fsync", node=node, volume_type="gp3", runs=slow_from_5, **kw)

    worker_25 = worker("gp3-local", "worker-1", 0.025)
    worker_48 = worker("gp3-local", "worker-2", 0.048)
    unknown_role = worker("gp3-old", "worker-3", 0.048, etcd_disk=None)
    scenarios = [
        Scenario(
            'a worker\'s per-node volume (node label, etcd_disk="false") at 25 and 48 ms, and '
            "one whose role is unknown, raise the StorageClass alert and never an etcd alert",
            i,
            [worker_25, worker_48, unknown_role],
            samples,
            checks=[
                check(SC, seen(i, 6, -SCRAPE_S)),
                check(
                    SC,
                    seen(i, 6),
                    sc_alert(worker_25, 3, 0.02, 0.025),
                    sc_alert(worker_48, 3, 0.02, 0.048),
                    sc_alert(unknown_role, 3, 0.02, 0.048),
                ),
                *[check(ETCD, seen(i, slot, after)) for slot in (5, 6, 11) for after in (0, 120)],
            ],
        ),
        Scenario(
            "per-volume-type thresholds: io2 above 5 ms, sc1 above 256 ms, an unknown type above "
            "64 ms fire from the third slow run; sc1 at 6 ms, gp3 at 12 ms, two slow runs of "
            "four, and an etcd disk do not",
            i,
            [io2, sc1, unknown, *quiet],
            samples,
            checks=[
                check(SC, seen(i, 6, -SCRAPE_S)),
                check(
                    SC,
                    seen(i, 6),
                    sc_alert(io2, 3, 0.005, 0.006),
                    sc_alert(sc1, 3, 0.256, 0.3),
                    sc_alert(unknown, 3, 0.064, 0.07),
                ),
                check(
                    SC,
                    seen(i, 11),
                    sc_alert(io2, 4, 0.005, 0.006),
                    sc_alert(sc1, 4, 0.256, 0.3),
                    sc_alert(unknown, 4, 0.064, 0.07),
                ),
            ],
        ),
    ]
    return [
        *scenarios,
        intermittent_sc_scenario(i),
        *twins(scenarios[0], [SC], [5 * i * 2 + 6, 8 * i * 2 + 6]),
    ]


def intermittent_sc_scenario(i: int) -> Scenario:
    """A gp2 volume at 48 ms every third run: a warning at the sixth slow run, never 3 of 4."""
    third = Probe("gp2", "etcd-fsync", volume_type="gp2", runs=every(3, Run(p99=0.048)))
    samples = INTERMITTENT_RUNS * i * 2
    threshold = "20ms, the threshold for its volume type"
    consequence = (
        "Applications that sync their writes (databases, queues) on this StorageClass wait that "
        "long at those times."
    )
    return Scenario(
        'a volume slow in every third run (48 ms on gp2) warns, pattern="intermittent", at '
        "its sixth slow run; the sustained rule (3 of the last 4) never fires",
        i,
        [third],
        samples,
        checks=[
            check(SC, seen(i, 17, -SCRAPE_S)),
            check(SC, seen(i, 17), intermittent_alert(third, 6, threshold, 0.048, consequence)),
            check(SC, seen(i, 70), intermittent_alert(third, 8, threshold, 0.0021, consequence)),
        ],
        expr_checks=[no_sustained_alert(SC, samples)],
    )
