"""The engine of the mixin's promtool scenarios: probes, their runs and what a Pushgateway
scrape of them looks like (Run, Probe, GatewayRestart, KubeNode), and Scenario, which turns
them into one promtool test. scenarios.py says why the tests are generated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fioprobe import __version__

SCRAPE_S = 30
#: A staleness marker (promtool's `stale`).
STALE_MARKER = float("inf")
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
            if values[s] is None and values[s - 1] not in (None, STALE_MARKER):
                values[s] = STALE_MARKER
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
        elif v == STALE_MARKER:
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
    #: Pushed groups of other kinds (provisioning_scenarios.py's ProvisionGroup): each has a
    #: `cluster` and writes its own series with `series(scenario)`, restarts included.
    groups: list[Any] = field(default_factory=list)

    def restarts(self) -> list[GatewayRestart]:
        return [
            r if isinstance(r, GatewayRestart) else GatewayRestart(r) for r in self.gateway_restarts
        ]

    def gaps_apply(self, cluster: str | None) -> bool:
        """Whether the restarts and gaps reach a group of this cluster."""
        return self._gaps_apply(cluster)

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
        for group in self.groups:
            out += group.series(self)
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

        identity = p.labels()
        # A series' key, made once per label set (formatting it at every sample was the
        # generator's hot spot).
        keys: dict[tuple[str, tuple[tuple[str, str], ...], str], tuple[str, str]] = {}

        def put(s: int, metric: str, extra: dict[str, str], value: float | None, pod: str) -> None:
            cached = (metric, tuple(extra.items()), pod)
            key = keys.get(cached)
            if key is None:
                labels = {**base, "pod": pod, **identity, **extra}
                key = keys[cached] = (metric, fmt_labels(labels))
            series = streams.get(key)
            if series is None:
                series = streams[key] = [None] * self.samples
            series[s] = value

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
                if values[s] is None and values[s - 1] not in (None, STALE_MARKER):
                    values[s] = STALE_MARKER
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
