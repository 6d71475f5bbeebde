"""promtool unit tests of the mixin's alerts, generated from scenarios of pushed probe runs.

Why generated: the same scenarios must run at several probe schedules (5, 10 and 15 minutes;
tests/test_mixin_schedules.py renders the rules for each and measures when each alert fires),
and they must look like what Prometheus really scrapes from a Pushgateway, which is too long
to write by hand: one sample every 30 s; each value steps once per probe run (the run pushes
~20 s after its slot starts and the next scrape sees it) and stays flat in between; the
labels prometheus-operator adds to a ServiceMonitor's targets (namespace, service, pod,
endpoint, container) besides the pushed job and instance="" (honorLabels); an optional
cluster label. A Pushgateway restart without persistence drops every series until the
probe's next push, and the new pod comes back with a new `pod` label.

Every test loads the mixin's rules (alerts/out/rules.yaml, the same for every deployment) and
the `fioprobe.expected` group of a deployment (RULE_FILES): the shipped manifests with their
etcd nodes named (alerts/out/expected.yaml, every fact static), or, for the per-node scenarios
(group probe-health-per-node), a deployment with per-node probes and the node inventory
(alerts/out/expected-per-node.yaml), or, for the etcd probes found by role (group
probe-health-etcd-by-role), the shipped manifests as they are
(alerts/out/expected-etcd-by-role.yaml); with kube-state-metrics' node series beside the pushed
ones (KubeNode) where the scenario has them.

`python alerts/tests/scenarios.py [outdir]` writes the committed 5-minute files
(scripts/generate.d/15-alert-tests.sh). Time 0 of every test is the start of run 0; "first
bad run" in docs/MIXIN.md's table is the start of the first slot whose run is bad.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from fioprobe import __version__

SCRAPE_S = 30
#: A staleness marker (promtool's `stale`).
STALE = float("inf")
RULES = "../out/rules.yaml"
#: The `fioprobe.expected` group of the shipped manifests with their etcd nodes named
#: (manifests/rules.jsonnet's named-etcd): every fact static.
EXPECTED = "../out/expected.yaml"
RUNBOOKS = "https://github.com/fioprobe/fioprobe/blob/main/docs/runbooks.md"
POD = "fioprobe-pushgateway-7c9d6b5f4-x2x9q"
POD_AFTER_RESTART = "fioprobe-pushgateway-7c9d6b5f4-k8r2m"
OPERATOR_LABELS = {
    "job": "fioprobe",
    "instance": "",
    "namespace": "fioprobe",
    "service": "fioprobe-pushgateway",
    "endpoint": "http",
    "container": "pushgateway",
}
#: The expected probes of the configuration most scenarios run in (named-etcd).
ETCD_SC, ETCD_NODES = "etcd-disk", ["control-plane-0", "control-plane-1", "control-plane-2"]


@dataclass
class Run:
    """One probe run: what its push carries."""

    success: bool = True
    p99: float | None = 0.002  # last run's fsync p99 (etcd-fsync profile)
    write_iops: float | None = None  # burst-ceiling profile
    buckets: dict[str, int] | None = None  # this run's own fsync histogram counts, by le
    reason: str = "fio_error"


@dataclass
class Probe:
    storageclass: str
    profile: str
    node: str | None = None
    cluster: str | None = None
    volume_type: str = "unknown"
    baseline_iops: float | None = None
    burst_iops: float | None = None
    #: runs[k] is run k (slot k), None where no run pushed (the probe was not running).
    runs: list[Run | None] = field(default_factory=list)
    #: From this sample on the group is gone from the Pushgateway (deleted), until a push.
    deleted_at: int | None = None
    #: Replace OPERATOR_LABELS' job/instance by OpenShift's exported_job/exported_instance.
    openshift: bool = False
    #: Its runs push this many scrapes later than the others' (per-node probes spread their
    #: runs over the interval by node).
    push_offset: int = 0
    #: The role its configuration publishes (fioprobe_info{etcd_disk}); None: no label (a
    #: version that did not publish it, so the role is unknown and the disk no etcd disk).
    etcd_disk: bool | None = False

    def labels(self) -> dict[str, str]:
        out = {"storageclass": self.storageclass, "profile": self.profile}
        if self.node:
            out["node"] = self.node
        if self.cluster:
            out["cluster"] = self.cluster
        return out


#: Target labels of kube-state-metrics' series as kube-prometheus scrapes them.
KSM_LABELS = {
    "job": "kube-state-metrics",
    "instance": "10.0.7.12:8443",
    "namespace": "monitoring",
    "service": "kube-state-metrics",
    "endpoint": "https-main",
    "container": "kube-rbac-proxy-main",
    "pod": "kube-state-metrics-6d8b7c9f6-q7w2x",
}


@dataclass
class GatewayRestart:
    """The Pushgateway restarts at sample `at`. Without persistence every group is gone from
    that scrape until its probe pushes again; with it, the groups are back after `down`
    missed scrapes, as they were. A new pod (a Deployment's rollout, a rescheduled pod) comes
    back with a new `pod` label; the same pod (a container restart) with the same one."""

    at: int
    new_pod: bool = True
    persistence: bool = False
    down: int = 2

    def kind(self) -> str:
        persistence = "with persistence" if self.persistence else "without persistence"
        pod = "a new pod" if self.new_pod else "the same pod"
        return f"{persistence}, {pod}"


#: Every kind of Pushgateway restart, at a sample to be set.
RESTART_KINDS = [
    GatewayRestart(0, new_pod=new_pod, persistence=persistence)
    for persistence in (False, True)
    for new_pod in (True, False)
]


@dataclass
class KubeNode:
    """A node as kube-state-metrics lists it: kube_node_info, and kube_node_spec_taint per
    taint, until the node is removed from the cluster."""

    name: str
    cluster: str | None = None
    #: (key, effect) of each taint.
    taints: list[tuple[str, str]] = field(default_factory=list)
    #: Its node-role.kubernetes.io/<role> labels, as kube_node_role{role} says them.
    roles: list[str] = field(default_factory=list)
    #: From this sample on the node is gone from the cluster.
    removed_at: int | None = None

    def series(
        self, samples: int, gaps: list[tuple[int, int]] | None = None
    ) -> list[dict[str, str]]:
        """`gaps`: (first sample, samples) when kube-state-metrics was not scraped (its pod
        restarted); it comes back as a new pod."""
        end = samples if self.removed_at is None else self.removed_at
        epochs: list[list[float | None]] = [[None] * samples]
        for s in range(end):
            gap = [g for g in gaps or [] if g[0] <= s < g[0] + g[1]]
            if gap:
                continue
            epoch = sum(1 for g in gaps or [] if g[0] + g[1] <= s)
            while len(epochs) <= epoch:
                epochs.append([None] * samples)
            epochs[epoch][s] = 1.0
        out: list[dict[str, str]] = []
        for epoch, values in enumerate(epochs):
            out += self._series(values, KSM_LABELS["pod"] + ("" if not epoch else f"-{epoch}"))
        return out

    def _series(self, values: list[float | None], pod: str) -> list[dict[str, str]]:
        # Prometheus marks a series stale at the first scrape without it.
        for s in range(1, len(values)):
            if values[s] is None and values[s - 1] not in (None, STALE):
                values[s] = STALE
        node = {"node": self.name, **({"cluster": self.cluster} if self.cluster else {})}
        info = {
            **KSM_LABELS,
            "pod": pod,
            **node,
            "container_runtime_version": "containerd://1.7.22",
            "kernel_version": "6.1.112",
            "kubelet_version": "v1.31.2",
            "os_image": "Ubuntu 24.04.1 LTS",
            "internal_ip": "10.0.3.4",
            "provider_id": f"aws:///eu-west-1a/i-{self.name}",
        }
        out = [{"series": "kube_node_info" + fmt_labels(info), "values": compress(values)}]
        for role in self.roles:
            labels = {**KSM_LABELS, "pod": pod, **node, "role": role}
            series = "kube_node_role" + fmt_labels(labels)
            out.append({"series": series, "values": compress(values)})
        for key, effect in self.taints:
            taint = {**KSM_LABELS, "pod": pod, **node, "key": key, "value": "", "effect": effect}
            out.append(
                {"series": "kube_node_spec_taint" + fmt_labels(taint), "values": compress(values)}
            )
        return out


def fmt_labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def compress(values: list[float | None]) -> str:
    """promtool's series notation: `vxN` is N+1 samples of v, `_xN` is N missing ones."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[i]:
            j += 1
        n = j - i + 1
        v = values[i]
        if v is None:
            out.append("_" if n == 1 else f"_x{n}")
        elif v == STALE:
            out += ["stale"] * n
        else:
            text = f"{v:.10g}"
            out.append(text if n == 1 else f"{text}x{n - 1}")
        i = j + 1
    return " ".join(out)


@dataclass
class Scenario:
    name: str
    interval_min: int
    probes: list[Probe]
    samples: int
    #: Pushgateway restarts (a sample: without persistence, a new pod).
    gateway_restarts: list[int | GatewayRestart] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: The nodes kube-state-metrics lists (the per-node rules' node inventory).
    kube_nodes: list[KubeNode] = field(default_factory=list)
    #: (first sample, samples) when kube-state-metrics was not scraped.
    ksm_gaps: list[tuple[int, int]] = field(default_factory=list)
    #: Only the probes and nodes of these clusters see the restarts and gaps (None: all).
    gap_clusters: set[str] | None = None
    #: promtool promql_expr_test entries.
    expr_checks: list[dict[str, Any]] = field(default_factory=list)
    #: About the rules' memory (a restart or gap twin of another scenario, a day-long lost
    #: group): the slowest tests, whose subject is neither the schedule nor a threshold.
    memory: bool = False

    def restarts(self) -> list[GatewayRestart]:
        return [
            r if isinstance(r, GatewayRestart) else GatewayRestart(r) for r in self.gateway_restarts
        ]

    def _gaps_apply(self, cluster: str | None) -> bool:
        return self.gap_clusters is None or cluster in self.gap_clusters

    @property
    def per_run(self) -> int:
        return self.interval_min * 60 // SCRAPE_S

    def push_sample(self, k: int) -> int:
        """The run of slot k pushes ~20 s after the slot starts: the next scrape has it."""
        return k * self.per_run + 1

    def series(self) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for probe in self.probes:
            out += self._probe_series(probe)
        for node in self.kube_nodes:
            out += node.series(
                self.samples, self.ksm_gaps if self._gaps_apply(node.cluster) else []
            )
        return out

    def _probe_series(self, p: Probe) -> list[dict[str, str]]:
        streams: dict[tuple[str, str], list[float | None]] = {}
        base = dict(OPERATOR_LABELS)
        if p.openshift:
            base = {
                ("exported_" + k if k in ("job", "instance") else k): v for k, v in base.items()
            }

        def put(s: int, metric: str, extra: dict[str, str], value: float | None, pod: str) -> None:
            labels = {**base, "pod": pod, **p.labels(), **extra}
            key = (metric, fmt_labels(labels))
            streams.setdefault(key, [None] * self.samples)[s] = value

        runs_total = 0
        last_success_ts: float | None = None
        cumulative: dict[str, int] = {}
        state: dict[str, Any] | None = None
        visible = False
        pushes = {
            self.push_sample(k) + p.push_offset: k for k, r in enumerate(p.runs) if r is not None
        }
        restarts = self.restarts() if self._gaps_apply(p.cluster) else []
        for s in range(self.samples):
            new_pods = sum(1 for r in restarts if r.new_pod and r.at <= s)
            pod = (
                POD
                if not new_pods
                else POD_AFTER_RESTART + ("" if new_pods == 1 else f"-{new_pods}")
            )
            lost = [r for r in restarts if r.at == s and not r.persistence]
            if lost or (p.deleted_at is not None and s == p.deleted_at):
                visible = False
            down = any(r.persistence and r.at <= s < r.at + r.down for r in restarts)
            if s in pushes:
                k = pushes[s]
                run = p.runs[k]
                assert run is not None
                runs_total += 1
                push_time = k * self.interval_min * 60 + 20 + p.push_offset * SCRAPE_S
                if run.success:
                    last_success_ts = push_time
                    for le, n in (run.buckets or {}).items():
                        cumulative[le] = cumulative.get(le, 0) + n
                state = {"run": run, "push_time": push_time, "runs_total": runs_total}
                visible = True
            if not visible or state is None or (down and s not in pushes):
                continue
            run = state["run"]
            put(s, "push_time_seconds", {}, state["push_time"], pod)
            put(s, "fioprobe_runs_total", {}, state["runs_total"], pod)
            put(s, "fioprobe_success", {}, 1.0 if run.success else 0.0, pod)
            if last_success_ts is not None:
                put(s, "fioprobe_last_success_timestamp_seconds", {}, last_success_ts, pod)
            info = {
                "fio_version": "fio-3.33",
                "version": __version__,
                "volume_type": p.volume_type,
                "provisioner": "ebs.csi.aws.com",
                "ran_on_node": p.node or "worker-1",
                "histogram_source": "bins",
            }
            if p.etcd_disk is not None:
                info["etcd_disk"] = "true" if p.etcd_disk else "false"
            put(s, "fioprobe_info", info, 1.0, pod)
            if p.baseline_iops is not None:
                put(s, "fioprobe_volume_baseline_iops", {}, p.baseline_iops, pod)
                put(s, "fioprobe_volume_burst_iops", {}, p.burst_iops, pod)
            if not run.success:
                put(s, "fioprobe_failure_reason_info", {"reason": run.reason}, 1.0, pod)
                continue
            if run.p99 is not None:
                put(
                    s,
                    "fioprobe_last_sync_latency_seconds",
                    {"fio_job": p.profile, "quantile": "0.99"},
                    run.p99,
                    pod,
                )
            if run.write_iops is not None:
                put(s, "fioprobe_write_iops", {"fio_job": p.profile}, run.write_iops, pod)
            for le, n in cumulative.items():
                put(s, "fioprobe_sync_latency_seconds_bucket", {"le": le}, n, pod)
        # Prometheus writes a staleness marker when a series is gone from a scrape (or its
        # target is): the series disappears at once, not five minutes later.
        for values in streams.values():
            for s in range(1, len(values)):
                if values[s] is None and values[s - 1] not in (None, STALE):
                    values[s] = STALE
        return [
            {"series": metric + labels, "values": compress(values)}
            for (metric, labels), values in streams.items()
        ]

    def test(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "interval": f"{SCRAPE_S}s",
            "input_series": self.series(),
            "alert_rule_test": self.checks,
        }
        if self.expr_checks:
            out["promql_expr_test"] = self.expr_checks
        return out


def seen(i: int, slot: float, after: int = 0) -> str:
    """eval_time: the first evaluation that sees the push of `slot` (30 s after the slot
    starts), plus `after` seconds."""
    return f"{int(slot * i * 60) + SCRAPE_S + after}s"


def pushed_at(i: int, slot: int) -> int:
    return slot * i * 60 + 20


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

    def copy(prefix: str) -> tuple[list[Probe], list[KubeNode]]:
        probes = [replace(p, cluster=prefix + (p.cluster or "")) for p in base.probes]
        nodes = [replace(n, cluster=prefix + (n.cluster or "")) for n in base.kube_nodes]
        return probes, nodes

    (bp, bn), (gp, gn) = copy("baseline"), copy("gap")
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
            gap_clusters={p.cluster or "" for p in gp} | {n.cluster or "" for n in gn},
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


def regression_scenarios(i: int) -> list[Scenario]:
    """FioProbeLatencyRegression: p99 over the last 6 runs against the median of a day one
    week back. The probe ran for a day a week ago (8 days before "now"), then not at all
    for almost a week (a gap the baseline must survive), then again for the last hours."""
    per_day = 24 * 60 // i
    # Cumulative per-run bucket counts (le -> fsyncs at or below it) of 1,000 fsyncs.
    healthy = {"0.001": 990, "0.002": 1000, "0.004": 1000, "0.008": 1000, "+Inf": 1000}
    slow = {"0.001": 500, "0.002": 500, "0.004": 500, "0.008": 995, "+Inf": 1000}
    # 36 runs now, ending at day 8 (three hours at a 5-minute schedule): half healthy, then
    # 18 slow ones, more than the 12-run hold plus the 6-run window need at any schedule.
    recent = 36
    end = 8 * per_day

    def history(now_runs: list[Run | None], baseline_runs: int) -> list[Run | None]:
        """A baseline day (day 0) holding `baseline_runs` runs, a gap, then `now_runs`."""
        return (
            [None] * (per_day - baseline_runs)
            + [Run(buckets=healthy)] * baseline_runs
            + [None] * (end - recent - per_day)
            + now_runs
        )

    half = recent // 2
    healthy_now = [Run(buckets=healthy)] * recent
    degraded_now = [Run(buckets=healthy)] * half + [Run(buckets=slow)] * (recent - half)
    once_now = (
        [Run(buckets=healthy)] * half
        + [Run(buckets=slow)]
        + [Run(buckets=healthy)] * (recent - half - 1)
    )
    regressed = Probe("gp2", "etcd-fsync", volume_type="gp2", runs=history(degraded_now, per_day))
    quiet = [
        Probe("gp3", "etcd-fsync", volume_type="gp3", runs=history(healthy_now, per_day)),
        # the same degradation without enough baseline: a quarter of the day a week ago
        Probe(
            "gp2-thin", "etcd-fsync", volume_type="gp2", runs=history(degraded_now, per_day // 4)
        ),
        # a new probe: only the last hours
        Probe(
            "gp2-new", "etcd-fsync", volume_type="gp2", runs=[None] * (end - recent) + degraded_now
        ),
        # a single slow run now, on a probe with a full baseline
        Probe("gp2-once", "etcd-fsync", volume_type="gp2", runs=history(once_now, per_day)),
    ]
    first_bad = end - recent + half
    # Alerts are evaluated every 5 minutes here (a week of 30 s evaluations takes promtool
    # minutes); the pushed series still have 30 s samples.
    fire = (first_bad * i * 60 + SCRAPE_S + 299) // 300 * 300 + 12 * i * 60
    scenarios = [
        Scenario(
            "p99 quadruples (1 ms -> 7.96 ms) on a probe with a full baseline day a week ago, "
            "after six days without data: fires after an hour; the same on a probe with a thin "
            "baseline, on a new probe, and a single slow run: never",
            i,
            [regressed, *quiet],
            end * i * 2,
            checks=[
                check("FioProbeLatencyRegression", fire - 300),
                check("FioProbeLatencyRegression", fire, regression_alert(regressed, 0.0079596, i)),
            ],
        ),
    ]
    # The regressed probe alone (a week of samples each), with Pushgateway restarts half an
    # hour into its hold and ten minutes after it fired.
    alone = Scenario("a regressed probe", i, [regressed], end * i * 2)
    restarts = [(fire - 1800) // SCRAPE_S + 3, (fire + 600) // SCRAPE_S + 3]
    # A week of samples per twin: only the harshest kind (every group lost until its next
    # push, a new pod), compared over the last three hours at the rules' 5-minute evaluations.
    return [
        *scenarios,
        *twins(
            alone,
            ["FioProbeLatencyRegression"],
            restarts,
            kinds=RESTART_KINDS[:1],
            span=3 * 3600,
            step=300,
        ),
    ]


GROUPS = {
    "etcd": etcd_scenarios,
    "storageclass-latency": storageclass_scenarios,
    "burst": burst_scenarios,
    "probe-health": health_scenarios,
    "probe-health-per-node": per_node_scenarios,
    "probe-health-etcd-by-role": etcd_by_role_scenarios,
    "latency-regression": regression_scenarios,
    "latency-outlier": outlier_scenarios,
}

#: The deployment each group's scenarios run in: manifests/rules.jsonnet's `example` (its
#: `config` TLA takes _config overrides), and the committed rule files its 5-minute tests load.
DEPLOYMENTS = {
    "named-etcd": [RULES, EXPECTED],
    "per-node": [RULES, "../out/expected-per-node.yaml"],
    "shipped": [RULES, "../out/expected-etcd-by-role.yaml"],
}
RULE_FILES = {"probe-health-per-node": "per-node", "probe-health-etcd-by-role": "shipped"}
#: Renders the mixin's rules and one deployment's group as one rule file.
RULES_JSONNET = "manifests/rules.jsonnet"


def deployment(group: str) -> str:
    """The manifests/rules.jsonnet example whose rules `group`'s scenarios run on."""
    return RULE_FILES.get(group, "named-etcd")


def rule_files(group: str) -> list[str]:
    """The committed rule files (relative to alerts/tests) `group`'s 5-minute tests load."""
    return DEPLOYMENTS[deployment(group)]


#: Recording rules before alerts, as their order in the rule file: at each evaluation the
#: alerts see this evaluation's recorded series. (A real Prometheus evaluates groups
#: independently, so there an alert may see them up to one evaluation interval later.)
GROUP_ORDER = [
    "fioprobe.rules",
    "fioprobe.expected",
    "fioprobe.continuous",
    "fioprobe.continuous.burn",
    "fioprobe-etcd",
    "fioprobe-storageclass-latency",
    "fioprobe-burst",
    "fioprobe-latency-regression",
    "fioprobe-latency-outlier",
    "fioprobe-probe-health",
    "fioprobe-continuous",
    "fioprobe-continuous-burn",
]


def document(
    group: str, interval_min: int, rules: str | None = None, memory: bool = True
) -> dict[str, Any]:
    """The promtool test file of `group` at this schedule; `memory=False` leaves out the
    scenarios about the rules' memory (the committed 5-minute files hold them)."""
    return {
        "rule_files": [rules] if rules else rule_files(group),
        "evaluation_interval": "5m" if group == "latency-regression" else f"{SCRAPE_S}s",
        "group_eval_order": GROUP_ORDER,
        "tests": [s.test() for s in GROUPS[group](interval_min) if memory or not s.memory],
    }


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str,
    lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="'" if "{" in v else None),
)


def dump(doc: dict[str, Any], group: str) -> str:
    head = (
        f"# Generated by alerts/tests/scenarios.py ({group}), a 5-minute probe schedule, 30 s\n"
        "# scrapes. Do not edit: change the scenarios and run scripts/generate.sh.\n"
        f"# promtool test rules alerts/tests/{group}.yaml\n"
    )
    return head + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100000)


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    for group in GROUPS:
        (out / f"{group}.yaml").write_text(dump(document(group, 5), group))


if __name__ == "__main__":
    main(sys.argv)
