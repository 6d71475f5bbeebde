"""Scenarios of alerts/provisioning.libsonnet: the provisioning probe's groups
(`fioprobe provision`, one Pushgateway group per StorageClass, and node for a class bound to
nodes: job="fioprobe_provision", no profile) and what each alert makes of them, and the
probes' rules, which must never take such a group for a probe.

The deployment (alerts/tests/provisioning-deployment.json, rendered into
alerts/out/expected-provisioning.yaml) lists provisioning groups and no probe: the probes' rules
are then the mixin alone's, where every probe group that stops is FioProbeStale, so a
provisioning group taken for a probe (an empty profile) would show there.

The provisioning schedule is config.libsonnet's default, provisionIntervalSeconds 600, at every
probe schedule: a run of slot k pushes 50 s after the slot starts (what a healthy EBS run
takes), so the scrape after that has it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scenario_builders import (
    FAST,
    after_stale,
    check,
    firing_throughout,
    humanize_duration,
    no_alert_ever,
    runs,
    stale_alert,
    twins,
)
from scenario_engine import (
    OPERATOR_LABELS,
    POD,
    POD_AFTER_RESTART,
    RESTART_KINDS,
    RUNBOOKS,
    SCRAPE_S,
    STALE_MARKER,
    Probe,
    Scenario,
    compress,
    fmt_labels,
    pushed_at,
)

#: The mixin keys of this file's deployment (manifests/rules.jsonnet's `config`).
DEPLOYMENT_CONFIG: dict[str, Any] = json.loads(
    (Path(__file__).parent / "provisioning-deployment.json").read_text()
)
#: config.libsonnet's provisionIntervalSeconds.
INTERVAL_S = 600
#: A run pushes this long after its slot starts.
PUSH_AFTER_S = 50
#: provisionStaleAfterRuns intervals plus the push margin (half an interval).
STALE_AFTER_S = 4 * INTERVAL_S + INTERVAL_S // 2

FAILING, SLOW = "FioProbeProvisioningFailing", "FioProbeProvisioningSlow"
LEFT, STALE, MISSING = (
    "FioProbeProvisioningObjectsLeft",
    "FioProbeProvisioningStale",
    "FioProbeProvisioningMissing",
)
ALL = (FAILING, SLOW, LEFT, STALE, MISSING)
PROBE_STALE, PROBE_MISSING, PROBE_FAILING = "FioProbeStale", "FioProbeMissing", "FioProbeFailing"

#: A healthy run's steps on EBS (seconds): docs/PROVISIONING.md's table.
HEALTHY_STEPS = {
    "created": 0.2,
    "scheduled": 0.6,
    "bound": 7.5,
    "attached": 11.0,
    "running": 5.2,
    "written": 1.1,
    "pod_deleted": 3.4,
    "detached": 9.0,
    "volume_deleted": 4.0,
}


@dataclass
class ProvisionRun:
    """One provisioning run (or skip) as its push carries it."""

    success: bool = True
    #: The skip's reason (fioprobe_provision_skipped_info): no success, no run counted.
    skipped: str | None = None
    reason: str = "deadline"
    #: The step it failed in (the failure reason's `step`); the steps after it did not run.
    step: str = "bound"
    #: Durations of the steps it finished, over HEALTHY_STEPS.
    steps: dict[str, float] = field(default_factory=dict)
    objects_left: int = 0

    def finished(self) -> dict[str, float]:
        if self.skipped is not None:
            return {}
        timed = {**HEALTHY_STEPS, **self.steps}
        if self.success:
            return timed
        order = list(HEALTHY_STEPS)
        return {s: timed[s] for s in order[: order.index(self.step)]}


OK = ProvisionRun()
FAIL = ProvisionRun(success=False, reason="provisioning_failed", step="bound")
SKIP = ProvisionRun(skipped="retain_policy")


@dataclass
class ProvisionGroup:
    """A provisioning group: its labels, its volume type (fioprobe_provision_info; None: no
    info, a class that was not found) and its runs, runs[k] in slot k (None: no run)."""

    storageclass: str
    node: str | None = None
    cluster: str | None = None
    volume_type: str | None = "gp2"
    runs: list[ProvisionRun | None] = field(default_factory=list)
    #: From this sample on the group is gone from the Pushgateway (deleted), until a push.
    deleted_at: int | None = None

    def labels(self) -> dict[str, str]:
        out = {"storageclass": self.storageclass}
        if self.node:
            out["node"] = self.node
        if self.cluster:
            out["cluster"] = self.cluster
        return out

    def series(self, scenario: Scenario) -> list[dict[str, str]]:
        """What Prometheus scrapes of this group, sample by sample, restarts included."""
        streams: dict[tuple[str, str], list[float | None]] = {}
        base = {**OPERATOR_LABELS, "job": "fioprobe_provision"}

        def put(s: int, metric: str, extra: dict[str, str], value: float, pod: str) -> None:
            key = (metric, fmt_labels({**base, "pod": pod, **self.labels(), **extra}))
            streams.setdefault(key, [None] * scenario.samples)[s] = value

        pushes = {push_sample(k): k for k, r in enumerate(self.runs) if r is not None}
        restarts = scenario.restarts() if scenario.gaps_apply(self.cluster) else []
        totals = {"runs": 0, "failures": 0, "removed": 0}
        last_success: float | None = None
        state: dict[str, Any] | None = None
        visible = False
        for s in range(scenario.samples):
            new_pods = sum(1 for r in restarts if r.new_pod and r.at <= s)
            pod = (
                POD
                if not new_pods
                else POD_AFTER_RESTART + ("" if new_pods == 1 else f"-{new_pods}")
            )
            if any(r.at == s and not r.persistence for r in restarts) or s == self.deleted_at:
                visible = False
            down = any(r.persistence and r.at <= s < r.at + r.down for r in restarts)
            if s in pushes:
                k = pushes[s]
                run = self.runs[k]
                assert run is not None
                previous = state["run"] if state else None
                if previous is not None and previous.objects_left:
                    totals["removed"] += previous.objects_left
                if run.skipped is None:
                    totals["runs"] += 1
                    totals["failures"] += 0 if run.success else 1
                push_time = pushed_at_s(k)
                if run.success and run.skipped is None:
                    last_success = push_time - 1
                state = {"run": run, "push_time": push_time, **totals}
                visible = True
            if not visible or state is None or (down and s not in pushes):
                continue
            run = state["run"]
            put(s, "push_time_seconds", {}, state["push_time"], pod)
            put(s, "fioprobe_provision_last_run_timestamp_seconds", {}, state["push_time"] - 1, pod)
            put(s, "fioprobe_provision_runs_total", {}, state["runs"], pod)
            put(s, "fioprobe_provision_failures_total", {}, state["failures"], pod)
            put(s, "fioprobe_provision_objects_removed_total", {}, state["removed"], pod)
            put(s, "fioprobe_provision_objects_left", {}, run.objects_left, pod)
            put(s, "fioprobe_owner_info", {"owner": "fioprobe"}, 1.0, pod)
            if last_success is not None:
                put(s, "fioprobe_provision_last_success_timestamp_seconds", {}, last_success, pod)
            if self.volume_type is not None:
                info = {
                    "provisioner": "ebs.csi.aws.com",
                    "volume_type": self.volume_type,
                    "binding_mode": "WaitForFirstConsumer",
                }
                put(s, "fioprobe_provision_info", info, 1.0, pod)
            if run.skipped is not None:
                put(s, "fioprobe_provision_skipped_info", {"reason": run.skipped}, 1.0, pod)
            else:
                put(s, "fioprobe_provision_success", {}, 1.0 if run.success else 0.0, pod)
                if not run.success:
                    why = {"reason": run.reason, "step": run.step}
                    put(s, "fioprobe_provision_failure_reason_info", why, 1.0, pod)
            for step, seconds in run.finished().items():
                put(
                    s, "fioprobe_provision_last_step_duration_seconds", {"step": step}, seconds, pod
                )
        for values in streams.values():
            for s in range(1, len(values)):
                if values[s] is None and values[s - 1] not in (None, STALE_MARKER):
                    values[s] = STALE_MARKER
        return [
            {"series": metric + labels, "values": compress(values)}
            for (metric, labels), values in streams.items()
        ]


def pushed_at_s(k: int) -> int:
    """Unix time (from the test's 0) the run of slot k pushes."""
    return k * INTERVAL_S + PUSH_AFTER_S


def push_sample(k: int) -> int:
    """The first scrape that has the run of slot k."""
    return pushed_at_s(k) // SCRAPE_S + 1


def seen(k: int) -> int:
    """Seconds of the first evaluation that sees the run of slot k."""
    return push_sample(k) * SCRAPE_S


# --- expected alerts ------------------------------------------------------------------------


def group_text(g: ProvisionGroup) -> str:
    text = f"StorageClass {g.storageclass}"
    if g.node:
        text += f" on node {g.node}"
    if g.cluster:
        text += f" in cluster {g.cluster}"
    return text


def failing_alert(
    g: ProvisionGroup, failed: int, reason: str | None, step: str = ""
) -> dict[str, Any]:
    why = ""
    if reason:
        why = (
            f" The last run failed with reason {reason}"
            + (f" in step {step}" if step else "")
            + "."
        )
    return {
        "exp_labels": {"severity": "warning", **g.labels()},
        "exp_annotations": {
            "summary": "A StorageClass keeps failing to give a new workload a volume.",
            "description": (
                f"{failed} of the last 3 provisioning runs of {group_text(g)} failed: a claim and "
                "a pod of this class did not get to a written, fdatasynced volume within their "
                f"deadlines, as a new StatefulSet replica would not.{why}"
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeprovisioningfailing",
        },
    }


def slow_alert(
    g: ProvisionGroup, step: str, slow: int, threshold: float, last: float
) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", "step": step, **g.labels()},
        "exp_annotations": {
            "summary": "A step of giving a new workload a volume takes longer than it should.",
            "description": (
                f"In {slow} of the last 3 provisioning runs of {group_text(g)}, step {step} took "
                f"longer than {humanize_duration(threshold)}, the threshold for its volume type. "
                f"The last run took {humanize_duration(last)} in it. Workloads that get a new "
                "volume of this class wait that long before they start."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeprovisioningslow",
        },
    }


def objects_left_alert(g: ProvisionGroup, runs_left: int, left: int) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **g.labels()},
        "exp_annotations": {
            "summary": "The provisioning probe's claims or pods outlive their deletion.",
            "description": (
                f"The last {runs_left} provisioning runs of {group_text(g)} each left their claim "
                f"or pod behind after their deadlines ({left} from the last one): something keeps "
                "them from being deleted (a finalizer, a volume that does not detach or unmount), "
                "and each holds a volume until the next run removes it."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeprovisioningobjectsleft",
        },
    }


def provision_stale_alert(g: ProvisionGroup, age_s: float) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **g.labels()},
        "exp_annotations": {
            "summary": "The provisioning probe of a StorageClass stopped running.",
            "description": (
                f"The last provisioning run of {group_text(g)} ended {humanize_duration(age_s)} "
                "ago, more than 4 provisioning intervals: its CronJob does not run, its runs hang, "
                "or it cannot reach the Pushgateway. No provisioning alert judges this class "
                "meanwhile."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeprovisioningstale",
        },
    }


def provision_missing_alert(g: ProvisionGroup) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **g.labels()},
        "exp_annotations": {
            "summary": "A StorageClass the provisioning probe should run on has no data at all.",
            "description": (
                f"The provisioning probe of {group_text(g)} is deployed but Prometheus has had "
                "none of its series for 4 provisioning intervals (45m): it never ran or pushed, "
                "or its Pushgateway group is gone (deleted, or a Pushgateway restart without "
                "persistence) while it does not run."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeprovisioningmissing",
        },
    }


def stale_at(last_run: int) -> int:
    """Seconds of the first evaluation at which a group whose last run was that of slot
    `last_run` is stale (its run ended more than STALE_AFTER_S ago)."""
    ended = pushed_at_s(last_run) - 1
    return (ended + STALE_AFTER_S) // SCRAPE_S * SCRAPE_S + SCRAPE_S


def gp(name: str, **kw: Any) -> ProvisionGroup:
    return ProvisionGroup(name, **kw)


def each(n: int, run: ProvisionRun, **at: ProvisionRun) -> list[ProvisionRun | None]:
    """n runs of `run`, with the runs at slot `_<k>` replaced: each(12, OK, _3=FAIL)."""
    out: list[ProvisionRun | None] = [run] * n
    for key, other in at.items():
        out[int(key[1:])] = other
    return out


# --- scenarios ------------------------------------------------------------------------------

N = 12
SAMPLES = N * INTERVAL_S // SCRAPE_S


def fleet(*groups: ProvisionGroup) -> list[ProvisionGroup]:
    """Every group the deployment expects, healthy (kept: skipped), but those of `groups`,
    which replace the healthy group of their StorageClass (and node) or come beside them."""
    healthy = [
        gp("gp2", runs=each(N, OK)),
        gp("gp3", volume_type="gp3", runs=each(N, OK)),
        gp("io2", volume_type="io2", runs=each(N, OK)),
        gp("ceph-block", volume_type="ceph-rbd", runs=each(N, OK)),
        gp("kept", volume_type=None, runs=each(N, SKIP)),
        gp("standard", volume_type=None, runs=each(N, OK)),
        gp("local-nvme", node="w1", volume_type=None, runs=each(N, OK)),
    ]
    mine = {(g.storageclass, g.node) for g in groups}
    return [g for g in healthy if (g.storageclass, g.node) not in mine] + list(groups)


def exclusion_scenario(i: int) -> Scenario:
    """The probes' rules never see a provisioning group: one that stops is no FioProbeStale and
    is in no probe: record; a probe of the same StorageClass that stops is FioProbeStale alone."""
    probe_runs = SAMPLES // (i * 2) + 1
    running = [
        Probe("gp2", "etcd-fsync", runs=runs((probe_runs, FAST))),
        Probe("gp3", "etcd-fsync", runs=runs((probe_runs, FAST))),
    ]
    stopped_probe = Probe("gp2", "randread-iops", runs=runs((5, FAST)))
    stopped = gp("gp3", volume_type="gp3", runs=each(4, OK))
    end = SAMPLES * SCRAPE_S
    at = stale_at(3)
    probe_at = max(at, after_stale(i, 4))
    return Scenario(
        "a provisioning group (job fioprobe_provision, no profile) that stops pushing is "
        "FioProbeProvisioningStale, never FioProbeStale or FioProbeMissing (the probes' rules "
        "here are the mixin alone's: every probe group that stops is Stale), and no probe: "
        "record holds it; a probe of the same StorageClass that stops is FioProbeStale alone",
        i,
        [*running, stopped_probe],
        SAMPLES,
        groups=fleet(stopped),
        checks=[
            check(PROBE_STALE, probe_at, stale_alert(stopped_probe, probe_at - pushed_at(i, 4))),
            check(PROBE_MISSING, probe_at),
            check(PROBE_FAILING, probe_at),
            check(STALE, at - SCRAPE_S),
            check(STALE, at, provision_stale_alert(stopped, at - pushed_at_s(3) + 1)),
            check(
                PROBE_STALE,
                end - SCRAPE_S,
                stale_alert(stopped_probe, end - SCRAPE_S - pushed_at(i, 4)),
            ),
        ],
        expr_checks=[
            *(
                {"expr": f'{record}{{profile=""}}', "eval_time": f"{t}s", "exp_samples": []}
                for record in (
                    "probe:push_time_seconds:max",
                    "probe:push_seen_time_seconds:max",
                    "probe:fioprobe_success:min",
                )
                for t in (seen(1), at, end - SCRAPE_S)
            ),
            {
                "expr": "count(probe:push_time_seconds:max)",
                "eval_time": f"{end - SCRAPE_S}s",
                "exp_samples": [{"labels": "{}", "value": 3}],
            },
            {
                "expr": (
                    f'count_over_time(ALERTS{{alertname=~"{PROBE_STALE}|{PROBE_MISSING}|'
                    f'{PROBE_FAILING}", profile=""}}[{end - SCRAPE_S}s])'
                ),
                "eval_time": f"{end - SCRAPE_S}s",
                "exp_samples": [],
            },
        ],
    )


def provisioning_scenarios(i: int) -> list[Scenario]:
    """FioProbeProvisioning*: Failing (2 of the last 3 runs), Slow (by volume type, with the
    default for the rest), ObjectsLeft, Stale and Missing; and the exclusion from the probes'
    rules. `i` (the probe schedule) reaches only the probes of the exclusion scenario."""
    # Failing: two of three fire, one of three (every third run) never; a skipped class never;
    # one that failed twice and is then skipped stops at once.
    failing = gp("io2", volume_type="io2", runs=each(N, OK, _3=FAIL, _4=FAIL))
    third = gp("gp2", runs=[FAIL if k % 3 == 0 and k else OK for k in range(N)])
    kept = gp("kept", volume_type=None, runs=each(N, SKIP))
    now_kept = gp("gp2-retain", runs=[*each(3, OK), FAIL, FAIL, *each(N - 5, SKIP)])
    # Slow: attach 90 s is slow on gp3 (60 s), not on ceph-rbd (the default's 120 s); a class
    # without the info (not found) is judged by the default: running 150 s is slow, attach
    # 90 s is not.
    slow_attach = ProvisionRun(steps={"attached": 90.0})
    gp3 = gp("gp3", volume_type="gp3", runs=each(N, OK, _3=slow_attach, _4=slow_attach))
    ceph = gp("ceph-block", volume_type="ceph-rbd", runs=each(N, slow_attach))
    slow_mount = ProvisionRun(steps={"attached": 90.0, "running": 150.0})
    no_info = gp(
        "standard", volume_type=None, runs=each(N, slow_attach, _3=slow_mount, _4=slow_mount)
    )
    # Objects left: two runs in a row fire, one (a killed run the next removes) never.
    left = gp(
        "gp3-left",
        volume_type="gp3",
        runs=each(N, OK, _3=ProvisionRun(objects_left=2), _4=ProvisionRun(objects_left=1)),
    )
    left_once = gp("gp2-left", runs=each(N, OK, _3=ProvisionRun(objects_left=2)))
    # Stale, Missing: an expected group that stops, one never pushed, one left behind by a
    # class removed from the configuration (not expected: silent).
    stopped = gp("ceph-block", volume_type="ceph-rbd", runs=each(4, OK))
    never = gp("standard")
    removed = gp("gp2-old", runs=each(3, OK))
    end = SAMPLES * SCRAPE_S

    main = Scenario(
        "provisioning: 2 of the last 3 runs failed fires (with the reason), 1 of 3 never; a "
        "skipped class never, a class skipped after failures stops at its skip; a slow attach "
        "fires by the gp3 threshold, the same attach under the default threshold (ceph-rbd, "
        "no info) does not, a slow mount does under the default; objects left by two runs in "
        "a row fire, by one never",
        i,
        [],
        SAMPLES,
        groups=fleet(failing, third, kept, now_kept, gp3, ceph, no_info, left, left_once),
        checks=[
            check(FAILING, seen(4) - SCRAPE_S),
            check(
                FAILING,
                seen(4),
                failing_alert(failing, 2, "provisioning_failed", "bound"),
                failing_alert(now_kept, 2, "provisioning_failed", "bound"),
            ),
            # The skip of gp2-retain ends its alert; io2's last run succeeded: 2 of 3 still.
            check(FAILING, seen(5), failing_alert(failing, 2, None)),
            check(FAILING, seen(6)),
            check(FAILING, seen(9)),
            check(SLOW, seen(4) - SCRAPE_S),
            check(
                SLOW,
                seen(4),
                slow_alert(gp3, "attached", 2, 60, 90),
                slow_alert(no_info, "running", 2, 120, 150),
            ),
            check(SLOW, seen(6)),
            check(LEFT, seen(4) - SCRAPE_S),
            check(LEFT, seen(4), objects_left_alert(left, 2, 1)),
            check(LEFT, seen(5)),
            check(STALE, end - SCRAPE_S),
            check(MISSING, end - SCRAPE_S),
        ],
        expr_checks=[
            no_alert_ever_for(FAILING, [third, kept], SAMPLES),
            no_alert_ever_for(SLOW, [ceph, third], SAMPLES),
            no_alert_ever_for(LEFT, [left_once], SAMPLES),
        ],
    )
    health = Scenario(
        "provisioning: an expected group that stops is Stale after 4 intervals and the margin; "
        "one that never pushed is Missing after as long; one no longer expected, left behind, "
        "is silent; a node-bound group that runs raises nothing",
        i,
        [],
        SAMPLES,
        groups=[g for g in fleet(stopped, removed) if g.storageclass != never.storageclass],
        checks=[
            check(MISSING, STALE_AFTER_S - SCRAPE_S),
            check(MISSING, STALE_AFTER_S, provision_missing_alert(never)),
            check(STALE, stale_at(3) - SCRAPE_S),
            check(
                STALE, stale_at(3), provision_stale_alert(stopped, stale_at(3) - pushed_at_s(3) + 1)
            ),
            check(
                STALE,
                end - SCRAPE_S,
                provision_stale_alert(stopped, end - SCRAPE_S - pushed_at_s(3) + 1),
            ),
            check(MISSING, end - SCRAPE_S, provision_missing_alert(never)),
            check(FAILING, end - SCRAPE_S),
        ],
    )
    always_failing = gp("gp2", runs=each(N, OK, **{f"_{k}": FAIL for k in range(3, N)}))
    twin_base = Scenario(
        main.name,
        i,
        [],
        SAMPLES,
        groups=fleet(failing, always_failing, gp3, left, stopped),
    )
    restarts = [push_sample(3) + 8, push_sample(4) + 8, stale_at(3) // SCRAPE_S + 6]
    return [
        exclusion_scenario(i),
        main,
        health,
        *(
            Scenario(
                f"provisioning: a Pushgateway restart {kind.kind()} while every group runs "
                "raises no alert",
                i,
                [],
                SAMPLES,
                gateway_restarts=[replace(kind, at=push_sample(5) + 6)],
                groups=fleet(),
                checks=[check(name, end - SCRAPE_S) for name in ALL],
                expr_checks=[no_alert_ever(ALL, SAMPLES)],
                memory=True,
            )
            for kind in RESTART_KINDS
        ),
        *twins(twin_base, [FAILING, SLOW, LEFT, STALE], restarts),
        Scenario(
            "provisioning: a group failing from its fourth run on fires once and stays firing "
            "through a Pushgateway restart without persistence",
            i,
            [],
            SAMPLES,
            gateway_restarts=[push_sample(6) + 6],
            groups=fleet(always_failing),
            checks=[
                check(
                    FAILING,
                    seen(4),
                    failing_alert(always_failing, 2, "provisioning_failed", "bound"),
                ),
                check(
                    FAILING,
                    seen(8),
                    failing_alert(always_failing, 3, "provisioning_failed", "bound"),
                ),
            ],
            expr_checks=[
                firing_throughout(
                    FAILING, 'severity="warning", storageclass="gp2"', seen(4), end - SCRAPE_S
                ),
            ],
            memory=True,
        ),
    ]


def no_alert_ever_for(alertname: str, groups: list[ProvisionGroup], samples: int) -> dict[str, Any]:
    """promql_expr_test: `alertname` was never pending or firing for these groups."""
    end = samples * SCRAPE_S
    classes = "|".join(g.storageclass for g in groups)
    return {
        "expr": (
            f'count_over_time(ALERTS{{alertname="{alertname}", storageclass=~"{classes}"}}'
            f"[{end - SCRAPE_S}s])"
        ),
        "eval_time": f"{end}s",
        "exp_samples": [],
    }
