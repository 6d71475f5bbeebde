"""Scenarios of alerts/probe-health.libsonnet: FioProbeFailing, FioProbeStale and
FioProbeMissing, for CronJob probes, per-node probes and etcd probes found by role, and a
lost group's memory."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scenario_builders import (
    FAST,
    after_stale,
    check,
    etcd_missing_alert,
    etcd_probe,
    failing_alert,
    missing_alert,
    no_alert_ever,
    per_node_missing_alert,
    runs,
    stale_alert,
    twins,
)
from scenario_engine import (
    ETCD_NODES,
    RESTART_KINDS,
    SCRAPE_S,
    GatewayRestart,
    KubeNode,
    Probe,
    Run,
    Scenario,
    pushed_at,
    seen,
)

FAILING, STALE, MISSING = "FioProbeFailing", "FioProbeStale", "FioProbeMissing"
#: config.libsonnet's lostGroupMemory: how long a group gone from the Pushgateway is remembered.
LOST_GROUP_MEMORY_S = 86400


def lost_group_scenario(i: int) -> Scenario:
    """A stopped probe whose group is lost is Stale while remembered, then Missing; one that
    stopped a day ago and whose group stays is Stale through a failed scrape of the Pushgateway
    and a restart of it without persistence (the day counts from when a group left, not from
    the probe's last push)."""
    deleted = 6 * i * 2
    lost = etcd_probe("control-plane-1", runs((5, FAST)), deleted_at=deleted)
    stopped = etcd_probe("control-plane-2", runs((5, FAST)))
    last_push = pushed_at(i, 4)
    # Remembered for the memory after the group was last seen (the scrape before it was
    # deleted): Stale up to the last evaluation before that, Missing (its `for` served
    # meanwhile) from there.
    forgotten = (deleted - 1) * SCRAPE_S + LOST_GROUP_MEMORY_S
    # Ten minutes after the stopped probe's last push is a day old: two failed scrapes of the
    # Pushgateway; twenty minutes later it restarts without persistence (every group is gone
    # until its probe pushes again; the stopped probe never does).
    # (After the lost group is forgotten too, at every schedule.)
    failed_scrapes = (max(last_push + LOST_GROUP_MEMORY_S, forgotten) + 600) // SCRAPE_S
    restart = failed_scrapes + 40
    # Past the memory's chain (3.5 intervals: 17m30s at 5 minutes), where a memory counted
    # from the last push would have ended after the restart.
    after_restart = restart * SCRAPE_S + 210 * i + 2 * SCRAPE_S
    samples = after_restart // SCRAPE_S + 4
    assert forgotten < failed_scrapes * SCRAPE_S
    running = [
        p
        for p in cronjob_and_etcd_probes(samples // (i * 2) + 1)
        if p.labels() not in (lost.labels(), stopped.labels())
    ]

    def stale(t: int) -> dict[str, Any]:
        return check(STALE, t, stale_alert(stopped, t - last_push))

    return Scenario(
        "a stopped probe whose group the Pushgateway lost (or `fioprobe gc` deleted) is Stale "
        "for lostGroupMemory (a day) after its group left, then Missing from the same "
        "evaluation on: never both, never neither; a probe stopped for a day whose group stays "
        "is Stale through a failed Pushgateway scrape and a Pushgateway restart",
        i,
        [lost, stopped, *running],
        samples,
        gateway_restarts=[
            GatewayRestart(failed_scrapes, new_pod=False, persistence=True, down=2),
            GatewayRestart(restart),
        ],
        memory=True,
        checks=[
            check(
                STALE,
                7 * 3600,
                stale_alert(lost, 7 * 3600 - last_push),
                stale_alert(stopped, 7 * 3600 - last_push),
            ),
            check(MISSING, 7 * 3600),
            check(
                STALE,
                forgotten - SCRAPE_S,
                stale_alert(lost, forgotten - SCRAPE_S - last_push),
                stale_alert(stopped, forgotten - SCRAPE_S - last_push),
            ),
            check(MISSING, forgotten - SCRAPE_S),
            stale(forgotten),
            check(MISSING, forgotten, missing_alert(lost, i)),
            # Neither resolved nor re-fired by the failed scrapes, nor by the restart.
            *[stale((failed_scrapes + k) * SCRAPE_S) for k in range(-1, 4)],
            *[stale((restart + k) * SCRAPE_S) for k in range(0, 3)],
            stale(after_restart),
            check(MISSING, after_restart, missing_alert(lost, i)),
        ],
    )


def health_scenarios(i: int) -> list[Scenario]:
    """FioProbeFailing, FioProbeStale, FioProbeMissing: one alert per stopped probe."""
    n = 12
    samples = n * i * 2
    fail = Run(success=False, p99=None, reason="timeout")
    failing = Probe("gp2", "randread-iops", runs=runs((4, FAST), (n - 4, fail)))
    failing_node = etcd_probe(
        "control-plane-0", runs((4, FAST), (n - 4, Run(success=False, p99=None, reason="no_space")))
    )
    stopped_after_failure = Probe("gp3", "etcd-fsync", runs=runs((4, FAST), (3, fail)))
    stopped = Probe("gp3", "randread-iops", runs=runs((5, FAST)))
    deleted = etcd_probe("control-plane-1", runs((5, FAST)), deleted_at=6 * i * 2)
    never = etcd_probe("control-plane-2", [])
    quiet = [
        # removed from the configuration: not expected any more, group left behind or deleted
        Probe("gp2-old", "etcd-fsync", runs=runs((3, FAST))),
        Probe("gp2-older", "etcd-fsync", runs=runs((3, FAST)), deleted_at=4 * i * 2),
        # every other run fails: never three in a row
        Probe("gp2", "etcd-fsync", runs=[FAST if k % 2 else fail for k in range(n)]),
        Probe("gp2", "burst-ceiling", runs=runs((n, FAST))),
    ]
    scenarios = [
        Scenario(
            "failing probes; a probe that stops after failed runs (Stale, not Failing forever); "
            "stopped probes with their group left behind or deleted (Stale: Prometheus remembers "
            "a lost group for lostGroupMemory); an expected probe that never pushed (Missing); "
            "removed probes and intermittent failures (nothing)",
            i,
            [failing, failing_node, stopped_after_failure, stopped, deleted, never, *quiet],
            samples,
            checks=[
                check(FAILING, seen(i, 4, 150 * i - SCRAPE_S)),
                check(
                    FAILING,
                    seen(i, 4, 150 * i),
                    failing_alert(failing, "timeout"),
                    failing_alert(failing_node, "no_space"),
                    failing_alert(stopped_after_failure, "timeout"),
                ),
                check(
                    FAILING,
                    after_stale(i, 6),
                    failing_alert(failing, "timeout"),
                    failing_alert(failing_node, "no_space"),
                ),
                check(STALE, after_stale(i, 4) - SCRAPE_S),
                check(
                    STALE,
                    after_stale(i, 4),
                    stale_alert(stopped, after_stale(i, 4) - pushed_at(i, 4)),
                    stale_alert(deleted, after_stale(i, 4) - pushed_at(i, 4)),
                ),
                check(
                    STALE,
                    after_stale(i, 6),
                    stale_alert(stopped_after_failure, after_stale(i, 6) - pushed_at(i, 6)),
                    stale_alert(stopped, after_stale(i, 6) - pushed_at(i, 4)),
                    stale_alert(deleted, after_stale(i, 6) - pushed_at(i, 4)),
                ),
                check(MISSING, 210 * i - SCRAPE_S),
                check(MISSING, 210 * i, missing_alert(never, i)),
                check(MISSING, 570 * i, missing_alert(never, i)),
                check(
                    STALE,
                    570 * i,
                    stale_alert(stopped, 570 * i - pushed_at(i, 4)),
                    stale_alert(deleted, 570 * i - pushed_at(i, 4)),
                ),
            ],
        ),
        *(
            Scenario(
                f"a Pushgateway restart {kind.kind()} while every expected probe runs: no "
                "alert (Failing, Stale or Missing) at any time",
                i,
                cronjob_and_etcd_probes(n),
                samples,
                gateway_restarts=[replace(kind, at=10 * i + 6)],
                checks=[
                    check(name, seen(i, slot, after))
                    for name in (FAILING, STALE, MISSING)
                    for slot, after in ((5, 4 * SCRAPE_S), (6, 0), (9, 0))
                ],
                expr_checks=[no_alert_ever((FAILING, STALE, MISSING), samples)],
            )
            for kind in RESTART_KINDS
        ),
    ]
    restarts = [5 * i * 2 + 6, 8 * i * 2 + 6]
    return [
        *scenarios,
        lost_group_scenario(i),
        *twins(scenarios[0], [FAILING, STALE], restarts),
    ]


#: The per-node probes of manifests/rules.jsonnet's per-node example: (storageclass, profile).
PER_NODE = [("node-disk", "etcd-fsync"), ("gp3", "etcd-fsync"), ("gp3", "randread-iops")]
CONTROL_PLANE_TAINT = ("node-role.kubernetes.io/control-plane", "NoSchedule")
#: A taint the per-node DaemonSet of manifests/rules.jsonnet's per-node example tolerates.
POOL_TAINT = ("fioprobe.example.com/pool", "NoSchedule")


def per_node(
    node: str,
    rs: list[Run | None],
    cluster: str | None = None,
    without: tuple[tuple[str, str], ...] = (),
) -> list[Probe]:
    """The per-node probes one node pushes (all of PER_NODE but `without`)."""
    return [
        Probe(sc, profile, node=node, cluster=cluster, runs=rs)
        for sc, profile in PER_NODE
        if (sc, profile) not in without
    ]


def cronjob_and_etcd_probes(n: int) -> list[Probe]:
    """The shipped configuration's StorageClass and etcd probes, all running: every expected
    probe (the per-node scenarios' rules expect them too, and gp3 is probed by a CronJob as
    well as per node)."""
    return [
        Probe(sc, profile, runs=runs((n, FAST)))
        for sc, profile in (
            ("gp2", "etcd-fsync"),
            ("gp2", "randread-iops"),
            ("gp2", "burst-ceiling"),
            ("gp3", "etcd-fsync"),
            ("gp3", "randread-iops"),
        )
    ] + [etcd_probe(node, runs((n, FAST))) for node in ETCD_NODES]


def per_node_scenarios(i: int) -> list[Scenario]:
    """FioProbeStale and FioProbeMissing of per-node probes (every node runs the same ones),
    with the node inventory (kube-state-metrics' nodes less the tainted ones)."""
    n = 12
    samples = n * i * 2
    static = cronjob_and_etcd_probes(n)
    stopped = per_node("w2", runs((5, FAST)))
    unreachable = per_node("w6", runs((5, FAST)))
    w3_lacks = Probe("gp3", "randread-iops", node="w3")
    never = [Probe(sc, profile, node=node) for node in ("w4", "w7") for sc, profile in PER_NODE]
    # Cluster b has no kube-state-metrics: its nodes are the ones that push.
    b_stopped = per_node("w3", runs((5, FAST)), cluster="b")
    b_removed = per_node("w9", runs((3, FAST)), cluster="b")
    a_lacks = Probe("gp3", "randread-iops", node="w2", cluster="a")
    b_lacks = Probe("node-disk", "etcd-fsync", node="w2", cluster="b")
    nowhere = [Probe(sc, profile) for sc, profile in PER_NODE]
    cronjob_gp3 = Probe("gp3", "etcd-fsync")
    healthy = [
        *per_node("w1", runs((n, FAST))),
        *per_node("w2", runs((n, FAST))),
    ]
    listed = [KubeNode("w1"), KubeNode("w2")]
    scenarios = [
        Scenario(
            "per-node probes: a node whose pod stopped (also an unreachable one) is Stale for "
            "each group; a node that does not push one of its targets is Missing it; a listed "
            "node that never pushed (also one with a taint the DaemonSet tolerates) is Missing "
            "all; a control-plane node (tainted, running only its etcd probe) and a removed node "
            "whose groups were left behind raise nothing",
            i,
            [
                *static,
                *per_node("w1", runs((n, FAST))),
                *stopped,
                *per_node("w3", runs((n, FAST)), without=(("gp3", "randread-iops"),)),
                *unreachable,
                *per_node("w5", runs((3, FAST))),
            ],
            samples,
            kube_nodes=[
                KubeNode("w1"),
                KubeNode("w2"),
                KubeNode("w3"),
                KubeNode("w4"),
                KubeNode("w5", removed_at=3 * i * 2),
                KubeNode("w6", taints=[("node.kubernetes.io/unreachable", "NoExecute")]),
                KubeNode("w7", taints=[POOL_TAINT]),
                *[KubeNode(node, taints=[CONTROL_PLANE_TAINT]) for node in ETCD_NODES],
            ],
            checks=[
                check(MISSING, 210 * i),
                check(
                    MISSING,
                    210 * i + SCRAPE_S,
                    *[per_node_missing_alert(p, i) for p in [w3_lacks, *never]],
                ),
                check(STALE, after_stale(i, 2)),
                check(STALE, after_stale(i, 4) - SCRAPE_S),
                check(
                    STALE,
                    after_stale(i, 4),
                    *[
                        stale_alert(p, after_stale(i, 4) - pushed_at(i, 4))
                        for p in [*stopped, *unreachable]
                    ],
                ),
                check(
                    MISSING,
                    after_stale(i, 6),
                    *[per_node_missing_alert(p, i) for p in [w3_lacks, *never]],
                ),
                check(FAILING, after_stale(i, 6)),
            ],
        ),
        Scenario(
            "clusters kept apart; a cluster without kube-state-metrics takes its nodes from the "
            "pushes of per-node probes (not of its etcd probes; a removed node's groups left "
            "behind are then Stale until deleted), one with it does not (its removed node is "
            "silent)",
            i,
            [
                *static,
                *per_node("w1", runs((n, FAST)), cluster="a"),
                *per_node("w2", runs((n, FAST)), cluster="a", without=(("gp3", "randread-iops"),)),
                *per_node("w9", runs((3, FAST)), cluster="a"),
                *per_node("w1", runs((n, FAST)), cluster="b"),
                *per_node(
                    "w2", runs((n, FAST)), cluster="b", without=(("node-disk", "etcd-fsync"),)
                ),
                *b_stopped,
                *b_removed,
                etcd_probe("control-plane-0", runs((n, FAST)), cluster="b"),
            ],
            samples,
            kube_nodes=[KubeNode("w1", cluster="a"), KubeNode("w2", cluster="a")],
            checks=[
                check(MISSING, 210 * i),
                check(
                    MISSING,
                    210 * i + SCRAPE_S,
                    per_node_missing_alert(a_lacks, i),
                    per_node_missing_alert(b_lacks, i),
                ),
                check(STALE, after_stale(i, 2) - SCRAPE_S),
                check(
                    STALE,
                    after_stale(i, 2),
                    *[stale_alert(p, after_stale(i, 2) - pushed_at(i, 2)) for p in b_removed],
                ),
                check(
                    STALE,
                    after_stale(i, 4),
                    *[stale_alert(p, after_stale(i, 4) - pushed_at(i, 4)) for p in b_stopped],
                    *[stale_alert(p, after_stale(i, 4) - pushed_at(i, 2)) for p in b_removed],
                ),
            ],
        ),
        Scenario(
            "the per-node DaemonSet never ran on any node: one Missing per probe, without a node, "
            "not one per listed node; the CronJob of a StorageClass also probed per node, with "
            "the same profile, missing too: a Missing of its own",
            i,
            [p for p in static if p.labels() != cronjob_gp3.labels()],
            samples,
            kube_nodes=listed,
            checks=[
                check(MISSING, 210 * i - SCRAPE_S),
                check(
                    MISSING,
                    210 * i,
                    missing_alert(cronjob_gp3, i),
                    *[per_node_missing_alert(p, i) for p in nowhere],
                ),
                check(STALE, 210 * i),
            ],
        ),
        Scenario(
            "one per-node probe that no node runs while the others run everywhere: one Missing "
            "for it, without a node",
            i,
            [
                *static,
                *per_node("w1", runs((n, FAST)), without=(("gp3", "randread-iops"),)),
                *per_node("w2", runs((n, FAST)), without=(("gp3", "randread-iops"),)),
            ],
            samples,
            kube_nodes=listed,
            checks=[
                check(MISSING, 210 * i - SCRAPE_S),
                check(MISSING, 210 * i, per_node_missing_alert(nowhere[2], i)),
                check(MISSING, after_stale(i, 6), per_node_missing_alert(nowhere[2], i)),
            ],
        ),
        Scenario(
            "a Pushgateway restart without persistence (every group gone until each node's next "
            "push) while every node runs its per-node probes: no alert",
            i,
            [*static, *healthy],
            samples,
            gateway_restarts=[10 * i + 6],
            kube_nodes=listed,
            checks=[
                check(name, seen(i, slot, after))
                for name in (FAILING, STALE, MISSING)
                for slot, after in ((5, 4 * SCRAPE_S), (6, 0), (9, 0))
            ],
        ),
    ]
    return scenarios + twins(
        scenarios[0],
        [STALE, MISSING],
        [5 * i * 2 + 6, 8 * i * 2 + 6],
        ksm_gaps=[[(5 * i * 2 + 6, 2)], [(5 * i * 2 + 6, 10)]],
    )


def etcd_by_role_scenarios(i: int) -> list[Scenario]:
    """FioProbeMissing and FioProbeStale of the etcd probes found by role (the shipped
    configuration): expected on the nodes kube-state-metrics lists with the control-plane or
    master role, or, without it, on the nodes that push them; nothing on a managed control
    plane, where no node has the role."""
    n = 12
    samples = n * i * 2
    # The shipped configuration's StorageClass probes, all running.
    storage = [
        Probe(sc, profile, runs=runs((n, FAST)))
        for sc, profile in (
            ("gp2", "etcd-fsync"),
            ("gp2", "randread-iops"),
            ("gp2", "burst-ceiling"),
            ("gp3", "etcd-fsync"),
            ("gp3", "randread-iops"),
        )
    ]
    healthy = etcd_probe("cp-a", runs((n, FAST)))
    stopped = etcd_probe("cp-b", runs((5, FAST)))
    never = etcd_probe("cp-c", [])
    workers = [KubeNode("w1"), KubeNode("w2")]
    # Cluster b has no kube-state-metrics: its etcd nodes are the ones that push.
    b_stopped = etcd_probe("cp-x", runs((5, FAST)), cluster="b")
    b_healthy = etcd_probe("cp-y", runs((n, FAST)), cluster="b")
    return [
        Scenario(
            "etcd nodes found by role: a node kube-state-metrics lists with the control-plane "
            "role (or master) that never pushed its etcd probe is Missing it (scope etcd); one "
            "whose pod stopped is Stale; a node with the role that pushes raises nothing, and "
            "workers without the role expect nothing",
            i,
            [*storage, healthy, stopped],
            samples,
            kube_nodes=[
                KubeNode("cp-a", roles=["control-plane"], taints=[CONTROL_PLANE_TAINT]),
                KubeNode("cp-b", roles=["control-plane"], taints=[CONTROL_PLANE_TAINT]),
                KubeNode("cp-c", roles=["master"]),
                *workers,
            ],
            checks=[
                check(MISSING, 210 * i - SCRAPE_S),
                check(MISSING, 210 * i, etcd_missing_alert(never, i)),
                check(STALE, after_stale(i, 4) - SCRAPE_S),
                check(
                    STALE,
                    after_stale(i, 4),
                    stale_alert(stopped, after_stale(i, 4) - pushed_at(i, 4)),
                ),
                check(MISSING, after_stale(i, 6), etcd_missing_alert(never, i)),
                check(FAILING, after_stale(i, 6)),
            ],
        ),
        Scenario(
            "a managed control plane (EKS, GKE, AKS): kube-state-metrics lists only workers, "
            "no node has the role and none pushes an etcd probe: no etcd probe is expected, "
            "nothing fires, ever",
            i,
            storage,
            samples,
            kube_nodes=workers,
            expr_checks=[no_alert_ever((FAILING, STALE, MISSING), samples)],
        ),
        Scenario(
            "without kube-state-metrics (cluster b), the etcd nodes are those that push: one "
            "that stopped is Stale, one that keeps pushing raises nothing; nothing is Missing "
            "(a node that never pushed cannot be known)",
            i,
            [*storage, b_stopped, b_healthy],
            samples,
            checks=[
                check(MISSING, after_stale(i, 6)),
                check(STALE, after_stale(i, 4) - SCRAPE_S),
                check(
                    STALE,
                    after_stale(i, 4),
                    stale_alert(b_stopped, after_stale(i, 4) - pushed_at(i, 4)),
                ),
            ],
        ),
    ]
