"""What the scenarios expect and how they are written: the alerts as each rule renders them
(etcd_alert, sc_alert, ...), and the helpers every group's scenarios share (runs, check,
same_alerts, twins, ...)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scenario_engine import (
    ETCD_SC,
    RESTART_KINDS,
    RUNBOOKS,
    SCRAPE_S,
    GatewayRestart,
    KubeNode,
    Probe,
    Run,
    Scenario,
    pushed_at,
)

# --- expected alerts ------------------------------------------------------------------------


def humanize_duration(v: float) -> str:
    """Prometheus' humanizeDuration for the values used here."""
    if v == 0:
        return "0s"
    if abs(v) >= 1:
        seconds = int(v)
        days, hours = seconds // 86400, seconds // 3600 % 24
        minutes, secs = seconds // 60 % 60, seconds % 60
        parts = []
        if days:
            parts.append(f"{days}d")
        if days or hours:
            parts.append(f"{hours}h")
        if days or hours or minutes:
            parts.append(f"{minutes}m")
        parts.append(f"{secs}s")
        return " ".join(parts)
    for prefix, factor in (("m", 1e3), ("u", 1e6), ("n", 1e9)):
        if abs(v) * factor >= 1:
            return f"{v * factor:.4g}{prefix}s"
    return f"{v:.4g}s"


def probe_text(p: Probe) -> str:
    text = f"storageclass {p.storageclass}, profile {p.profile}"
    if p.node:
        text += f" on node {p.node}"
    if p.cluster:
        text += f" in cluster {p.cluster}"
    return text


def held_text(p: Probe, above: str) -> str:
    """The description of a latency alert held by a failed or single fast run ($value 0)."""
    return (
        f"fioprobe {probe_text(p)} measured an fsync p99 above {above} in earlier runs, and its "
        "last two runs were not both successful and fast: the alert holds until they are."
    )


def intermittent_alert(
    p: Probe, slow: int, threshold: str, last_p99: float, consequence: str
) -> dict[str, Any]:
    """FioProbeEtcdFsyncLatencyHigh or FioProbeStorageClassLatencyHigh, pattern="intermittent"."""
    etcd = p.etcd_disk
    return {
        "exp_labels": {"severity": "warning", "pattern": "intermittent", **p.labels()},
        "exp_annotations": {
            "summary": (
                "The disk that holds etcd is too slow to fsync in many probe runs, on and off."
                if etcd
                else "A volume is slower to fsync than its volume type should be, in many probe "
                "runs, on and off."
            ),
            "description": (
                f"{slow} of the last 24 runs of fioprobe {probe_text(p)} measured an fsync p99 "
                f"above {threshold}: slow in some runs only, again and again. The last run "
                f"measured {humanize_duration(last_p99)}. {consequence}"
            ),
            "runbook_url": f"{RUNBOOKS}#"
            + ("fioprobeetcdfsynclatencyhigh" if etcd else "fioprobestorageclasslatencyhigh"),
        },
    }


def outlier_alert(p: Probe, ratio: float, last_p99: float) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A disk's fsync p99 is several times that of its siblings, for several "
            "probe runs.",
            "description": (
                f"The last 3 runs of fioprobe {probe_text(p)} measured an fsync p99 of "
                f"{ratio:.1f} times or more the median of the same profile on its StorageClass "
                "on the other nodes (at least 3 probes; alert from 3x and 2ms above it). The last "
                f"run measured {humanize_duration(last_p99)}. One node or volume is sick while its "
                "siblings are fine; no history is needed."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobelatencyoutlier",
        },
    }


def firing_throughout(alertname: str, matchers: str, start: int, end: int) -> dict[str, Any]:
    """promql_expr_test: the alert fired at every evaluation from `start` to `end` (seconds):
    it never resolved in between, so it notified once."""
    return {
        "expr": (
            f'count_over_time(ALERTS{{alertname="{alertname}", alertstate="firing", '
            f"{matchers}}}[{end - start + SCRAPE_S // 2}s])"
        ),
        "eval_time": f"{end}s",
        "exp_samples": [
            {
                "labels": "{" + f'alertname="{alertname}", alertstate="firing", {matchers}' + "}",
                "value": (end - start) // SCRAPE_S + 1,
            }
        ],
    }


def etcd_alert(
    p: Probe, severity: str, slow: int, last_p99: float | None, held: bool = False
) -> dict[str, Any]:
    threshold, consequence = {
        "warning": (
            0.01,
            "etcd on this disk commits slower than it should; expect slow API requests.",
        ),
        "critical": (
            0.032,
            "etcd on this disk risks missed heartbeats, leader elections and API timeouts.",
        ),
    }[severity]
    above = f"the {severity} threshold of {humanize_duration(threshold)}"
    return {
        "exp_labels": {"severity": severity, **p.labels()},
        "exp_annotations": {
            "summary": "The disk that holds etcd is too slow to fsync for several probe runs.",
            "description": (
                held_text(p, above)
                if held
                else f"{slow} of the last 3 runs of fioprobe {probe_text(p)} measured an fsync "
                f"p99 above {above}."
                + (
                    ""
                    if last_p99 is None
                    else f" The last run measured {humanize_duration(last_p99)}."
                )
            )
            + f" {consequence}",
            "runbook_url": f"{RUNBOOKS}#fioprobeetcdfsynclatencyhigh",
        },
    }


def sc_alert(p: Probe, slow: int, threshold: float, last_p99: float) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A volume is slower to fsync than its volume type should be, for several "
            "probe runs.",
            "description": (
                f"{slow} of the last 4 runs of fioprobe {probe_text(p)} measured an fsync p99 "
                f"above {humanize_duration(threshold)}, the threshold for its volume type "
                f"({p.volume_type}). The last run measured {humanize_duration(last_p99)}. "
                "Applications that sync their writes (databases, queues) on this StorageClass "
                "wait that long."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobestorageclasslatencyhigh",
        },
    }


def burst_alert(p: Probe, iops: float) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A volume that should burst only delivers its baseline IOPS: burst "
            "credits are likely exhausted.",
            "description": (
                f"The IOPS-ceiling probe of {probe_text(p)} measured {iops:.0f} write IOPS, within "
                "the lowest 25% of the range between the volume's baseline and burst IOPS, in "
                "each of its last 3 runs. IO beyond the baseline is throttled until credits are "
                "earned back."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobeburstcreditsdepleted",
        },
    }


def failing_alert(p: Probe, reason: str | None) -> dict[str, Any]:
    why = f" Reason of the last failure: {reason}." if reason else ""
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A fioprobe probe keeps failing, so its disk is not being measured.",
            "description": f"The last 3 runs of fioprobe {probe_text(p)} failed.{why}",
            "runbook_url": f"{RUNBOOKS}#fioprobefailing",
        },
    }


def stale_alert(p: Probe, age_s: float) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A fioprobe probe stopped pushing results, so its disk is not being "
            "measured.",
            "description": (
                f"fioprobe {probe_text(p)} last pushed a result {humanize_duration(age_s)} ago, "
                "more than 3 probe intervals: it is not running or cannot reach the "
                "Pushgateway. Its last values are kept there but no alert uses them."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobestale",
        },
    }


def missing_alert(p: Probe, interval_min: int) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **p.labels()},
        "exp_annotations": {
            "summary": "A deployed fioprobe probe has no data in Prometheus at all.",
            "description": (
                f"fioprobe {probe_text(p)} is deployed but Prometheus has had none of its series "
                f"for 3 probe intervals ({duration(3.5 * interval_min * 60)}): it never pushed, "
                "or its Pushgateway group is gone (deleted, or a Pushgateway restart without "
                "persistence) while the probe is not running."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobemissing",
        },
    }


def per_node_missing_alert(p: Probe, interval_min: int) -> dict[str, Any]:
    """FioProbeMissing of a per-node probe: on a node (p.node), or from every node (no node)."""
    if p.node:
        why = (
            ", while the node runs per-node probes (it pushes others, or the node inventory "
            "lists it) and other nodes push this one: the per-node pod of that node does not run "
            "(not scheduled, crashing, its volumes not mounted) or runs a configuration without "
            "this target (a rollout in progress)."
        )
    else:
        why = (
            " from any node: the per-node DaemonSet runs nowhere (deleted, no pod scheduled or "
            "running) or none of its pods runs this target, or the Pushgateway lost every group "
            "while the probes were not running."
        )
    return {
        "exp_labels": {"severity": "warning", "scope": "per-node", **p.labels()},
        "exp_annotations": {
            "summary": "A per-node fioprobe probe has no data from a node that runs per-node "
            "probes, or from any node.",
            "description": (
                f"fioprobe {probe_text(p)}, a per-node probe, has had no series in Prometheus for "
                f"3 probe intervals ({duration(3.5 * interval_min * 60)}){why}"
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobemissing",
        },
    }


def etcd_missing_alert(p: Probe, interval_min: int) -> dict[str, Any]:
    """FioProbeMissing of an etcd probe found by role, on one etcd node (p.node)."""
    return {
        "exp_labels": {"severity": "warning", "scope": "etcd", **p.labels()},
        "exp_annotations": {
            "summary": "An etcd node has no fioprobe probe of its disk.",
            "description": (
                f"fioprobe {probe_text(p)}, the probe of the etcd disk, has had no series in "
                f"Prometheus for 3 probe intervals ({duration(3.5 * interval_min * 60)}), while "
                "the node holds etcd (kube-state-metrics lists it with the role, or it pushed "
                "before): its pod does not run there (not scheduled, the node directories "
                "refused by the prepare step, etcd.dataDir missing on the node) or cannot reach "
                "the Pushgateway."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobemissing",
        },
    }


def regression_alert(p: Probe, value: float, interval_min: int) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", "operation": "sync", **p.labels()},
        "exp_annotations": {
            "summary": "A probe measures a much higher p99 latency than it did a week earlier.",
            "description": (
                f"sync p99 of fioprobe {probe_text(p)} over its last 6 runs is "
                f"{humanize_duration(value)}: more than 2x and over 2ms above its median over "
                "1d 1w earlier, for 12 runs now."
            ),
            "runbook_url": f"{RUNBOOKS}#fioprobelatencyregression",
        },
    }


def duration(seconds: float) -> str:
    """lib/util.libsonnet's duration()."""
    ms = round(seconds * 1000)
    out = ""
    for unit, size in (("h", 3600000), ("m", 60000), ("s", 1000), ("ms", 1)):
        n, ms = divmod(ms, size)
        if n:
            out += f"{n}{unit}"
    return out


# --- scenarios ------------------------------------------------------------------------------

FAST = Run(p99=0.0021)


def runs(*spec: tuple[int, Run | None]) -> list[Run | None]:
    """(count, run) pairs, e.g. runs((4, FAST), (3, SLOW))."""
    out: list[Run | None] = []
    for n, run in spec:
        out += [run] * n
    return out


def etcd_probe(node: str, rs: list[Run | None], **kw: Any) -> Probe:
    return Probe(ETCD_SC, "etcd-fsync", node=node, runs=rs, etcd_disk=True, **kw)


def after_stale(i: int, slot: int) -> int:
    """Seconds of the first evaluation at which a probe whose last push was at `slot` is
    stale (its push is older than 3.5 intervals)."""
    return (pushed_at(i, slot) + 210 * i) // SCRAPE_S * SCRAPE_S + SCRAPE_S


def same_alerts(
    samples: int, span: int | None = None, step: int = SCRAPE_S
) -> list[dict[str, Any]]:
    """promql_expr_test: at every evaluation of the whole span (or the last `span` seconds),
    cluster "gap..." holds exactly the ALERTS (name, state and every label but the cluster's
    prefix) that cluster "baseline..." holds: a restart or gap neither raised, resolved,
    re-fired nor delayed any."""
    end = samples * SCRAPE_S
    span = span or end
    side = 'label_replace(ALERTS{{cluster=~"{0}.*"}}, "cluster", "$1", "cluster", "{0}(.*)")'
    return [
        {
            "expr": (
                f"count_over_time(({side.format(a)} unless {side.format(b)})[{span}s:{step}s])"
            ),
            "eval_time": f"{end}s",
            "exp_samples": [],
        }
        for a, b in (("gap", "baseline"), ("baseline", "gap"))
    ]


def fired_in_gap_cluster(
    alertname: str, samples: int, span: int | None = None, step: int = SCRAPE_S
) -> dict[str, Any]:
    """promql_expr_test: the alert did fire in cluster "gap...", so same_alerts compared
    something."""
    end = samples * SCRAPE_S
    span = span or end
    return {
        "expr": (
            f'max(count_over_time(ALERTS{{alertname="{alertname}", alertstate="firing", '
            f'cluster=~"gap.*"}}[{span}s:{step}s])) > bool 0'
        ),
        "eval_time": f"{end}s",
        "exp_samples": [{"labels": "{}", "value": 1}],
    }


def twins(
    base: Scenario,
    alertnames: list[str],
    restart_samples: list[int],
    ksm_gaps: list[list[tuple[int, int]]] | None = None,
    kinds: list[GatewayRestart] | None = None,
    span: int | None = None,
    step: int = SCRAPE_S,
) -> list[Scenario]:
    """`base`'s probes and nodes twice, in clusters "baseline..." and "gap..." (the rules keep
    clusters apart), with Pushgateway restarts of every kind at `restart_samples` (and, for each
    entry of `ksm_gaps`, kube-state-metrics gaps) in the "gap" cluster only: every alert must be
    the same in both at every evaluation, and each of `alertnames` fires. Two moments: one
    while an alert is pending (or its condition building up), one while it fires."""

    def copy(prefix: str) -> tuple[list[Probe], list[KubeNode], list[Any]]:
        probes = [replace(p, cluster=prefix + (p.cluster or "")) for p in base.probes]
        nodes = [replace(n, cluster=prefix + (n.cluster or "")) for n in base.kube_nodes]
        groups = [replace(g, cluster=prefix + (g.cluster or "")) for g in base.groups]
        return probes, nodes, groups

    (bp, bn, bg), (gp, gn, gg) = copy("baseline"), copy("gap")
    expr = same_alerts(base.samples, span, step) + [
        fired_in_gap_cluster(a, base.samples, span, step) for a in alertnames
    ]
    out = [
        Scenario(
            f"{base.name}; a Pushgateway restart {kind.kind()} while pending and while firing "
            "changes no alert (compared with the same timeline without it)",
            base.interval_min,
            bp + gp,
            base.samples,
            gateway_restarts=[replace(kind, at=at) for at in restart_samples],
            kube_nodes=bn + gn,
            gap_clusters={p.cluster or "" for p in gp}
            | {n.cluster or "" for n in gn}
            | {g.cluster or "" for g in gg},
            groups=bg + gg,
            expr_checks=expr,
            memory=True,
        )
        for kind in kinds or RESTART_KINDS
    ]
    for gaps in ksm_gaps or []:
        minutes = ", ".join(f"{n * SCRAPE_S // 60} min" for _, n in gaps)
        out.append(
            Scenario(
                f"{base.name}; kube-state-metrics gaps ({minutes}, each ending with a new pod) "
                "change no alert",
                base.interval_min,
                bp + gp,
                base.samples,
                kube_nodes=bn + gn,
                groups=bg + gg,
                ksm_gaps=gaps,
                gap_clusters={n.cluster or "" for n in gn} | {p.cluster or "" for p in gp},
                expr_checks=expr,
                memory=True,
            )
        )
    return out


def check(alertname: str, at: str | int, *alerts: dict[str, Any]) -> dict[str, Any]:
    return {
        "eval_time": at if isinstance(at, str) else f"{at}s",
        "alertname": alertname,
        "exp_alerts": list(alerts),
    }


def no_alert_ever(alertnames: tuple[str, ...], samples: int) -> dict[str, Any]:
    """promql_expr_test: none of these alerts was pending or firing at any evaluation after
    the first minute (before their first push every expected probe is Missing, pending)."""
    end = samples * SCRAPE_S
    names = "|".join(alertnames)
    return {
        "expr": f'count_over_time(ALERTS{{alertname=~"{names}"}}[{end - 60}s])',
        "eval_time": f"{end}s",
        "exp_samples": [],
    }
