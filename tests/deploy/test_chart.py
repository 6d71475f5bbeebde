"""The Helm chart charts/fioprobe/ with the real helm (scripts/setup.d/34-helm.sh): lint, what
`helm template` gives, values refused by its schema with a message naming the key, the rules
and dashboards equal to the mixin's for every probe interval, the generated files current,
and every object accepted by the test suite's real kube-apiserver.

That the chart gives the same objects as the jsonnet manifests is tests/deploy/test_chart_parity.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from support import kubeapi
from support.chart import CHART, HELM, HELM4, VARIANTS, helm, helm_template
from support.kubeapi import Kube
from support.paths import GO_JSONNET

INTERVALS = (1, 5, 10, 15)

#: A kube-apiserver and etcd of this module's own, ready for the generated manifests.
kube = kubeapi.kube


@pytest.fixture(scope="module", autouse=True)
def _helm() -> None:
    if not HELM.exists():
        pytest.fail(f"{HELM} missing: run `make setup` (scripts/setup.d/34-helm.sh)")
    if not HELM4.exists():
        pytest.fail(f"{HELM4} missing: run `make setup` (scripts/setup.d/37-helm4.sh)")


#: Both supported Helm versions, for the tests that run each.
HELMS = pytest.mark.parametrize("binary", [HELM, HELM4], ids=["helm3", "helm4"])


#: The StorageClasses of manifests/config.libsonnet's example (the chart names none).
EXAMPLE_CLASSES: dict[str, Any] = {
    "storageClasses": [
        {
            "name": "gp2",
            "volume": {"type": "gp2", "size": "100Gi", "provisioner": "ebs.csi.aws.com"},
            "profiles": ["etcd-fsync", "randread-iops", "burst-ceiling"],
        },
        {
            "name": "gp3",
            "volume": {"type": "gp3", "size": "20Gi", "iops": 3000, "throughput": "125Mi"},
            "profiles": ["etcd-fsync", "randread-iops"],
        },
    ]
}


def objects(values: dict[str, Any] | None = None, namespace: str = "fioprobe") -> list[dict]:
    result = helm_template(values or {}, namespace)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d is not None]


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


# --- lint and template ------------------------------------------------------------------------


@HELMS
@pytest.mark.parametrize("strict", [False, True])
def test_helm_lint_is_clean(strict: bool, binary: Path) -> None:
    result = helm("lint", str(CHART), *(["--strict"] if strict else []), binary=binary)
    assert result.returncode == 0, result.stdout + result.stderr
    findings = [line for line in result.stdout.splitlines() if line.startswith("[")]
    # The one finding left is informational: the chart has no icon to point at.
    assert findings == ["[INFO] Chart.yaml: icon is recommended"], result.stdout


@HELMS
@pytest.mark.parametrize("variant", ["openshift-per-node-tls", "sharded", "existing-pushgateway"])
def test_helm_lint_is_clean_with_other_values(variant: str, tmp_path: Path, binary: Path) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(VARIANTS[variant]))
    result = helm("lint", "--strict", str(CHART), "-f", str(values), binary=binary)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


@pytest.mark.parametrize("variant", ["example-classes", *sorted(VARIANTS)])
def test_helm_4_renders_what_helm_3_renders(variant: str) -> None:
    """The same objects, field for field, from both supported Helm versions."""
    values = EXAMPLE_CLASSES if variant == "example-classes" else VARIANTS[variant]
    rendered = {}
    for binary in (HELM, HELM4):
        result = helm_template(values, binary=binary)
        assert result.returncode == 0, result.stderr
        rendered[binary.name] = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    assert rendered["helm4"] == rendered["helm"]


def test_template_gives_probes_rules_monitors_and_dashboards() -> None:
    docs = objects(EXAMPLE_CLASSES)
    assert set(of_kind(docs, "CronJob")) == {"fioprobe-gp2", "fioprobe-gp3", "fioprobe-provision"}
    # The etcd disks: a DaemonSet on the nodes with the role, and the stream beside it.
    assert set(of_kind(docs, "DaemonSet")) == {"fioprobe-etcd", "fioprobe-continuous"}
    assert set(of_kind(docs, "PrometheusRule")) == {"fioprobe", "fioprobe-expected"}
    assert set(of_kind(docs, "ServiceMonitor")) == {"fioprobe-pushgateway"}
    assert set(of_kind(docs, "PodMonitor")) == {"fioprobe-continuous"}
    dashboards = {
        name: d
        for name, d in of_kind(docs, "ConfigMap").items()
        if d["metadata"]["labels"].get("grafana_dashboard") == "1"
    }
    assert set(dashboards) == {
        "grafana-dashboard-fioprobe-overview",
        "grafana-dashboard-fioprobe-comparison",
        "grafana-dashboard-fioprobe-etcd-disks",
    }
    for d in dashboards.values():
        (text,) = d["data"].values()
        assert json.loads(text)["uid"], d["metadata"]["name"]
    # Helm's own labels, and the release's namespace for everything but the etcd probes, the
    # provisioning probe's test namespace and what is cluster-wide (their namespaces, which the
    # chart creates, and the roles).
    cluster_wide = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        assert d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        if d["kind"] not in cluster_wide:
            assert d["metadata"]["namespace"] in (
                "fioprobe",
                "fioprobe-etcd",
                "fioprobe-provision",
            ), d["metadata"]
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "PersistentVolumeClaim"}
    namespaces = of_kind(docs, "Namespace")
    assert set(namespaces) == {"fioprobe-etcd", "fioprobe-provision"}
    enforce = "pod-security.kubernetes.io/enforce"
    assert namespaces["fioprobe-etcd"]["metadata"]["labels"][enforce] == "privileged"
    assert namespaces["fioprobe-provision"]["metadata"]["labels"][enforce] == "restricted"


def test_without_prometheus_operator_no_monitor_or_rule_is_rendered() -> None:
    """A cluster that does not serve monitoring.coreos.com/v1 (Helm's capabilities without
    it): applying a ServiceMonitor there fails on "no matches for kind", so none is rendered;
    the rest is as with it."""
    result = helm("template", "fioprobe", str(CHART), "--namespace", "fioprobe")
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    assert not [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]
    with_operator = objects()
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(
        (d["kind"], d["metadata"]["name"])
        for d in with_operator
        if not d["apiVersion"].startswith("monitoring.coreos.com/")
    )


def test_the_release_namespace_holds_the_main_objects() -> None:
    docs = objects(namespace="storage-probes")
    urls = {
        yaml.safe_load(text)["pushgateway"]["url"]
        for cm in of_kind(docs, "ConfigMap").values()
        if cm["metadata"]["name"] == "fioprobe-config"
        for text in cm["data"].values()
    }
    assert urls == {"http://fioprobe-pushgateway.storage-probes.svc:9091"}
    assert of_kind(docs, "Deployment")["fioprobe-pushgateway"]["metadata"]["namespace"] == (
        "storage-probes"
    )


@pytest.mark.parametrize(
    ("release_label", "expected"),
    [(False, None), (True, "fioprobe"), ("kube-prometheus-stack", "kube-prometheus-stack")],
)
def test_release_label_marks_monitors_and_rules_only(
    release_label: bool | str, expected: str | None
) -> None:
    docs = objects({"releaseLabel": release_label})
    monitoring = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    for d in docs:
        label = d["metadata"]["labels"].get("release")
        assert label == (expected if d["kind"] in monitoring else None), (d["kind"], label)


def test_toggles_switch_monitors_rules_and_dashboards_off() -> None:
    docs = objects(
        {
            "monitoring": {
                "serviceMonitor": {"enabled": False},
                "podMonitor": {"enabled": False},
                "prometheusRule": {"enabled": False},
                "dashboards": {"enabled": False},
            }
        }
    )
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert not [d for d in docs if "grafana_dashboard" in d["metadata"]["labels"]]


def test_dashboards_label_and_namespace_are_values() -> None:
    docs = objects(
        {
            "monitoring": {
                "dashboards": {
                    "namespace": "grafana",
                    "labels": {"grafana_dashboard": None, "grafana.example/dashboard": "yes"},
                }
            }
        }
    )
    dashboards = [d for d in docs if d["metadata"]["name"].startswith("grafana-dashboard-")]
    assert len(dashboards) == 3
    for d in dashboards:
        assert d["metadata"]["namespace"] == "grafana"
        assert d["metadata"]["labels"]["grafana.example/dashboard"] == "yes"
        assert "grafana_dashboard" not in d["metadata"]["labels"]


def test_an_existing_pushgateway_replaces_the_charts_own() -> None:
    url = "http://prometheus-pushgateway.monitoring.svc:9091"
    docs = objects({"pushgateway": {"url": url}})
    assert not [d for d in docs if d["metadata"]["labels"]["app.kubernetes.io/component"]
                == "pushgateway"]  # fmt: skip
    configs = [
        yaml.safe_load(text)
        for cm in of_kind(docs, "ConfigMap").values()
        if cm["metadata"]["name"] in ("fioprobe-config", "fioprobe-continuous")
        for text in cm["data"].values()
    ]
    assert configs and {c["pushgateway"]["url"] for c in configs} == {url}


# --- the schema ---------------------------------------------------------------------------------

#: The smallest distributed benchmark the chart takes.
BENCH: dict[str, Any] = {"name": "q", "storageclass": "gp3", "servers": 1, "volumeSize": "1Gi"}

#: Values the schema (or, where JSON Schema cannot say it, the templates) refuses, with
#: fragments of the message that must name the key and what is wrong.
BAD: list[tuple[dict[str, Any], list[str]]] = [
    ({"everyMinute": 5}, ["additional properties 'everyMinute' not allowed"]),
    ({"namespace": "x"}, ["additional properties 'namespace' not allowed"]),
    (
        {"monitoring": {"mixinConfig": {"failingRuns": 2}}},
        ["at '/monitoring'", "'mixinConfig' not allowed"],
    ),
    ({"everyMinutes": "5"}, ["at '/everyMinutes'", "value must be one of 1, 5, 10, 15"]),
    (
        {"platform": "OpenShift"},
        ["at '/platform'", "value must be one of 'kubernetes', 'openshift'"],
    ),
    ({"image": {"pullPolicy": "Sometimes"}}, ["at '/image/pullPolicy'", "'Always'"]),
    ({"etcd": {"nodes": ["a", "a"]}}, ["at '/etcd/nodes'", "items at 0 and 1 are equal"]),
    ({"etcd": {"nodes": "cp-0"}}, ["at '/etcd/nodes'", "got string, want array"]),
    ({"continuous": {"port": 70000}}, ["at '/continuous/port'", "maximum"]),
    ({"continuous": {"intervalSeconds": 0.01}}, ["at '/continuous/intervalSeconds'", "minimum"]),
    ({"continuous": {"writeSize": 2300.5}}, ["at '/continuous/writeSize'", "want integer"]),
    ({"continuous": {"fileSize": "4Q"}}, ["at '/continuous/fileSize'", "does not match pattern"]),
    ({"successfulJobsHistoryLimit": -1}, ["at '/successfulJobsHistoryLimit'", "minimum"]),
    ({"pushgateway": {"replicas": 0}}, ["at '/pushgateway/replicas'", "value must be 'auto'"]),
    ({"pushgateway": {"replicas": "two"}}, ["at '/pushgateway/replicas'", "value must be 'auto'"]),
    ({"pushgateway": {"url": "http://pgw"}}, ["at '/pushgateway/url'", "does not match pattern"]),
    ({"pushgateway": {"auth": True}}, ["at '/pushgateway/auth'", "got boolean, want object"]),
    ({"dns": {"podSelector": {"k8s-app": 1}}}, ["at '/dns/podSelector/k8s-app'", "got number"]),
    ({"releaseLabel": 1}, ["at '/releaseLabel'", "got number, want boolean"]),
    ({"storageClasses": [{"name": "gp2"}]}, ["at '/storageClasses/0'", "'volume'", "'profiles'"]),
    (
        {"storageClasses": [{"name": "gp2", "volume": {"size": "1Gi"}, "profiles": []}]},
        ["at '/storageClasses/0/profiles'", "minItems"],
    ),
    (
        {"storageClasses": [{"name": "", "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]}]},
        ["at '/storageClasses/0/name'", "minLength"],
    ),
    (
        {"storageClasses": [{"name": "a", "volume": {"type": "gp2"}, "profiles": ["etcd-fsync"]}]},
        ["at '/storageClasses/0/volume'", "missing property 'size'"],
    ),
    (
        {
            "storageClasses": [
                {"name": "a", "volume": {"size": "1Gi", "iops": "x"}, "profiles": ["x"]}
            ]
        },
        ["at '/storageClasses/0/volume/iops'"],
    ),
    (
        {"storageClasses": [{"name": "a", "volume": {"size": "1Gi"}, "profiles": [{"nam": "x"}]}]},
        ["at '/storageClasses/0/profiles/0'"],
    ),
    # What JSON Schema cannot say, the templates check (as the manifests do).
    (
        {
            "storageClasses": [
                {"name": "a", "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]},
                {"name": "a", "volume": {"size": "2Gi"}, "profiles": ["etcd-fsync"]},
            ]
        },
        ["storageClasses: a name appears more than once: a, a"],
    ),
    ({"continuous": {"fileSize": "2Gi"}}, ["continuous.fileSize: must be a whole number of bytes"]),
    ({"continuous": {"fileSize": "64Ki", "writeSize": 1048576}}, ["must hold at least one write"]),
    (
        {"stateHostPath": "/var/lib/etcd-fioprobe/state"},
        ["stateHostPath", "overlaps etcd.hostPath"],
    ),
    ({"stateHostPath": "/var/lib/etcd/state"}, ["stateHostPath", "overlaps etcd.dataDir"]),
    ({"etcd": {"hostPath": "/var/lib/etcd/fioprobe"}}, ["etcd.hostPath", "overlaps etcd.dataDir"]),
    ({"apiServer": {"ports": []}}, ["at '/apiServer/ports'", "minItems"]),
    ({"perNode": {"enabled": True}}, ["perNode.enabled needs perNode.localDisks"]),
    # Distributed benchmarks: what components/distributed.libsonnet refuses, refused here too.
    ({"benchmarks": [{**BENCH, "name": "Qualify_gp3"}]}, ["at '/benchmarks/0/name'", "pattern"]),
    ({"benchmarks": [{**BENCH, "name": "b" * 38}]}, ["at '/benchmarks/0/name'", "pattern"]),
    ({"benchmarks": [{**BENCH, "servers": 0}]}, ["at '/benchmarks/0/servers'", "minimum"]),
    ({"benchmarks": [{**BENCH, "servers": 2.5}]}, ["at '/benchmarks/0/servers'", "integer"]),
    ({"benchmarks": [{**BENCH, "volumeSize": "lots"}]}, ["at '/benchmarks/0/volumeSize'"]),
    ({"benchmarks": [{**BENCH, "replicas": 3}]}, ["at '/benchmarks/0'", "'replicas' not allowed"]),
    ({"benchmarks": [{"name": "a", "servers": 1}]}, ["at '/benchmarks/0'", "'storageclass'"]),
    ({"benchmarks": [{**BENCH, "plan": {"servers": 5}}]}, ["at '/benchmarks/0/plan'"]),
    ({"benchmarks": [{**BENCH, "plan": {"volume_size": "1Ti"}}]}, ["at '/benchmarks/0/plan'"]),
    ({"benchmarks": [BENCH, BENCH]}, ["benchmarks: a name appears more than once: q, q"]),
    (
        {"benchmarks": [BENCH], "pushgateway": {"auth": {"enabled": True}}},
        ["distributed: push to a Pushgateway with auth or TLS is not supported yet"],
    ),
]


@pytest.mark.parametrize(("values", "fragments"), BAD, ids=[json.dumps(v) for v, _ in BAD])
def test_bad_values_are_refused_with_a_message_naming_the_key(
    values: dict[str, Any], fragments: list[str]
) -> None:
    result = helm_template(values)
    assert result.returncode != 0, f"accepted: {values}"
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize("minutes", [2, 3, 4, 6, 7, 12, 20, 30, 60, 0, -5, 5.5])
def test_every_minutes_outside_the_rendered_intervals_is_refused(minutes: float) -> None:
    result = helm_template({"everyMinutes": minutes})
    assert result.returncode != 0
    assert "at '/everyMinutes': value must be one of 1, 5, 10, 15" in result.stderr, result.stderr


def _schema_paths(schema: dict[str, Any], path: str = "") -> set[str]:
    paths = set()
    for key, sub in schema.get("properties", {}).items():
        at = f"{path}.{key}" if path else key
        paths.add(at)
        paths |= _schema_paths(sub, at)
        if sub.get("type") == "array" and "items" in sub:
            paths |= _schema_paths(sub["items"], f"{at}[]")
    return paths


def test_the_chart_has_the_manifests_keys_but_the_helm_ones() -> None:
    """Every key of manifests/lib/defaults.libsonnet is a value, but the two the chart leaves to
    Helm (the namespace, the mixin's config); its own are releaseLabel, defaultStorageClass (what
    it probes when storageClasses names none) and benchmarks (the argument of
    components/distributed.libsonnet, not a configuration key)."""
    rows = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e",
         "[r.key for r in (import 'manifests/lib/params.libsonnet')"
         ".rows(import 'manifests/lib/defaults.libsonnet')]"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    manifest_keys = set(json.loads(rows.stdout))
    chart_keys = _schema_paths(json.loads((CHART / "values.schema.json").read_text()))
    assert manifest_keys - chart_keys == {"namespace", "monitoring.mixinConfig"}

    # Keys of titled types (volume model, profile, toleration) have no rows of their own.
    def documented(key: str) -> bool:
        parent = key.rsplit(".", 1)[0] if "." in key else ""
        return parent == "" or any(k.startswith(parent + ".") for k in manifest_keys)

    own = {k for k in chart_keys - manifest_keys if documented(k)}
    assert {k for k in own if not k.startswith(("benchmarks[].", "defaultStorageClass."))} == {
        "releaseLabel",
        "benchmarks",
        "defaultStorageClass",
    }
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) == {k for k in chart_keys if "." not in k and "[]" not in k}


def test_the_app_version_is_fioprobes() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    init = (REPO / "exporter" / "fioprobe" / "__init__.py").read_text()
    assert f'__version__ = "{chart["appVersion"]}"' in init
    assert values["version"] == values["image"]["tag"] == chart["appVersion"]


def test_no_template_line_is_over_120_characters() -> None:
    """The templates read like a chart's (issue 43): plain YAML with inserts, an expression
    that does not fit written over several lines inside its action."""
    long = [
        f"{path.relative_to(CHART)}:{number}: {len(line)}"
        for path in sorted((CHART / "templates").rglob("*"))
        if path.is_file()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > 120
    ]
    assert long == []


def test_values_yaml_opens_with_what_a_new_user_sets() -> None:
    """values.yaml is in the reader's order (manifests/chart.jsonnet `order`), not jsonnet's
    alphabetical one: the image, what to probe, the etcd disks, how often and where the
    results go first; inside an object, `enabled` first."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert list(values)[:6] == [
        "image", "storageClasses", "defaultStorageClass", "etcd", "everyMinutes", "monitoring",
    ]  # fmt: skip
    assert list(values)[-1] == "version"
    for key in ("etcd", "continuous", "perNode", "defaultStorageClass"):
        assert next(iter(values[key])) == "enabled", key


# --- one source for rules and dashboards ------------------------------------------------------


def _mixin_rules(minutes: int, provision_minutes: int = 10) -> list[dict[str, Any]]:
    """The mixin alone (alerts/rules.jsonnet) at these probe and provisioning intervals: no
    deployment's group."""
    config = (
        f"{{ probeIntervalSeconds: {minutes * 60}, "
        f"provisionIntervalSeconds: {provision_minutes * 60} }}"
    )
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "--tla-code", f"config={config}",
         str(REPO / "alerts" / "rules.jsonnet")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    groups: list[dict[str, Any]] = json.loads(result.stdout)["groups"]
    return groups


@pytest.mark.parametrize("minutes", INTERVALS)
def test_the_prometheus_rule_is_the_mixins_rules_at_the_interval(minutes: int) -> None:
    docs = objects({"everyMinutes": minutes})
    rules = of_kind(docs, "PrometheusRule")
    assert rules["fioprobe"]["spec"]["groups"] == _mixin_rules(minutes)
    (expected,) = rules["fioprobe-expected"]["spec"]["groups"]
    assert expected["name"] == "fioprobe.expected"


@pytest.mark.parametrize("minutes", [5, 15, 30])
def test_the_provisioning_group_follows_the_provisioning_interval(minutes: int) -> None:
    """The provisioning probe's alert group, rendered per provisioning interval, appended to
    the probe interval's rules: the mixin's own for both intervals."""
    docs = objects({"everyMinutes": 1, "provisioning": {"everyMinutes": minutes}})
    groups = of_kind(docs, "PrometheusRule")["fioprobe"]["spec"]["groups"]
    assert groups == _mixin_rules(1, minutes)
    assert groups[-1]["name"] == "fioprobe-provisioning"
    assert groups != _mixin_rules(1, 10)


@pytest.mark.parametrize("minutes", [1, 20, 60, 7])
def test_a_provisioning_interval_without_rules_is_refused(minutes: int) -> None:
    result = helm_template({"provisioning": {"everyMinutes": minutes}})
    assert result.returncode != 0
    assert "at '/provisioning/everyMinutes': value must be one of 5, 10, 15, 30" in result.stderr


@pytest.mark.parametrize(
    ("provisioning", "message"),
    [
        ({"nodes": {"local-pth": ["w1"]}},
         "provisioning.nodes names local-pth, not a class the probe provisions (fast)"),
        ({"nodes": {"fast": []}}, "at '/provisioning/nodes/fast': minItems: got 0, want 1"),
        ({"nodes": {"fast": ["W1"]}}, "at '/provisioning/nodes/fast/0': 'W1' does not match"),
        ({"nodes": {"fast": ["w1", "w1"]}},
         "at '/provisioning/nodes/fast': items at 0 and 1 are equal"),
        ({"nodes": {"fast": ["w..1"]}}, "at '/provisioning/nodes/fast/0': 'w..1' does not match"),
        ({"nodes": {"fast": [f"n{i}" for i in range(1001)]}},
         "at '/provisioning/nodes/fast': maxItems: got 1,001, want 1,000"),
        ({"storageClasses": ["a.-b"]},
         "at '/provisioning/storageClasses/0': 'a.-b' does not match"),
        ({"maxParallel": 0}, "at '/provisioning/maxParallel': minimum: got 0, want 1"),
    ],
)  # fmt: skip
def test_nodes_that_no_run_could_use_are_refused(
    provisioning: dict[str, Any], message: str
) -> None:
    """What `fioprobe provision` would refuse at every run of the CronJob fails the install."""
    result = helm_template({"provisioning": {"storageClasses": ["fast"], **provisioning}})
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("field", ["name", "storageClassName"])
def test_a_provisioned_class_that_is_no_storageclass_name_is_refused(field: str) -> None:
    entry = {
        "name": "fast",
        "volume": {"size": "1Gi"},
        "profiles": ["etcd-fsync"],
        field: "Fast_SSD",
    }
    result = helm_template({"storageClasses": [entry]})
    assert result.returncode != 0
    assert (
        "provisioning: Fast_SSD is not a StorageClass name (lower-case letters, digits, - and .), "
        "which every run would refuse; set provision: false on its storageClasses entry"
    ) in result.stderr, result.stderr


def test_the_five_minute_rules_are_the_committed_rule_file() -> None:
    committed = yaml.safe_load((REPO / "alerts" / "out" / "rules.yaml").read_text())["groups"]
    assert of_kind(objects(), "PrometheusRule")["fioprobe"]["spec"]["groups"] == committed


def test_the_intervals_render_different_windows() -> None:
    texts = {m: json.dumps(_mixin_rules(m)) for m in INTERVALS}
    assert len(set(texts.values())) == len(INTERVALS)


def test_the_five_minute_dashboards_are_the_committed_ones() -> None:
    docs = objects()
    for cm in of_kind(docs, "ConfigMap").values():
        if not cm["metadata"]["name"].startswith("grafana-dashboard-"):
            continue
        ((file, text),) = cm["data"].items()
        committed = json.loads((REPO / "dashboards" / "out" / file).read_text())
        assert json.loads(text) == committed, file


def test_the_generated_chart_files_are_current(tmp_path: Path) -> None:
    out = tmp_path / "chart"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "generate.d" / "32-chart.sh"), str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    generated = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert generated, "nothing generated"
    for rel in generated:
        assert (out / rel).read_bytes() == (CHART / rel).read_bytes(), f"{rel}: run make generate"
    committed = {p.relative_to(CHART) for p in (CHART / "files").rglob("*") if p.is_file()}
    assert committed <= set(generated), committed - set(generated)


# --- on a real kube-apiserver ---------------------------------------------------------------

#: Namespaces a user creates before installing (the chart's README): the release's, and the
#: privileged ones of the hostPath probes.
NAMESPACES = {
    "fioprobe": "restricted",
    "fioprobe-etcd": "privileged",
    "fioprobe-nodes": "privileged",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "pushgateway": {"auth": {"enabled": True}, "tls": {"enabled": True}, "replicas": 2},
            "perNode": {
                "enabled": True,
                "localDisks": [{"name": "node-disk", "profiles": ["etcd-fsync"]}],
                "storageClasses": [
                    {"name": "gp3-node", "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]}
                ],
            },
            "releaseLabel": "kube-prometheus-stack",
        },
    ],
    ids=["default", "auth-tls-sharded-per-node"],
)
def test_every_object_is_accepted_by_the_api_server(
    kube: Kube, values: dict[str, Any], tmp_path: Path
) -> None:
    for name, level in NAMESPACES.items():
        created = kube.kubectl("create", "namespace", name)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
        labelled = kube.kubectl(
            "label", "--overwrite", "namespace", name,
            f"pod-security.kubernetes.io/enforce={level}",
            "pod-security.kubernetes.io/warn=restricted",
        )  # fmt: skip
        assert labelled.returncode == 0, labelled.stderr
    result = helm_template(values)
    assert result.returncode == 0, result.stderr
    rendered = tmp_path / "chart.yaml"
    rendered.write_text(result.stdout)
    applied = kube.dry_run("-f", str(rendered))
    assert applied.returncode == 0, applied.stderr
    count = len([d for d in yaml.safe_load_all(result.stdout) if d is not None])
    assert len([x for x in applied.stdout.splitlines() if "(server dry run)" in x]) == count
    # Pod Security: nothing in the restricted release namespace, only hostPath elsewhere.
    in_release = [
        d for d in yaml.safe_load_all(result.stdout)
        if d is not None and d["metadata"].get("namespace") == "fioprobe"
    ]  # fmt: skip
    restricted = tmp_path / "restricted.yaml"
    restricted.write_text(yaml.safe_dump_all(in_release))
    checked = kube.dry_run("-f", str(restricted))
    assert checked.returncode == 0, checked.stderr
    assert [x for x in checked.stderr.splitlines() if "PodSecurity" in x] == [], checked.stderr


@pytest.mark.slow
@HELMS
def test_helm_install_dry_run_against_the_api_server_prints_the_notes(
    kube: Kube, binary: Path
) -> None:
    """Helm's own install path against the real API server (capabilities, the release's
    rendering with the server's version; Helm 4 applies server-side), and the notes it prints
    for the user, with both supported Helm versions."""
    for name in NAMESPACES:
        created = kube.kubectl("create", "namespace", name)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    result = helm(
        "install", "fioprobe", str(CHART), "--namespace", "fioprobe", "--dry-run=server",
        "--kubeconfig", str(kube.kubeconfig), binary=binary,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "is installed in namespace fioprobe" in notes
    assert (
        "etcd disks: a DaemonSet in namespace fioprobe-etcd on every node labelled "
        "node-role.kubernetes.io/control-plane or node-role.kubernetes.io/master"
    ) in notes
    # The namespace existed before the release (created above): left as it was, its label said.
    assert "Namespace fioprobe-etcd existed before this release" in notes
    assert "pod-security.kubernetes.io/enforce=privileged" in notes
    # This API server has no node at all: as a managed control plane looks from inside.
    assert "etcd's disks are not visible on this cluster" in " ".join(notes.split())
    # This API server serves the prometheus-operator CRDs: the monitors are installed, and the
    # notes say what kube-prometheus-stack needs to select them.
    assert "does not serve monitoring.coreos.com/v1" not in notes
    assert "set releaseLabel to its release name" in notes


#: The provisioning probe's test namespace of these installs: the fixture's server already holds
#: the manifests' (fioprobe-provision), which is no release's, so the chart refuses it.
PROVISION_NAMESPACE = "fioprobe-provision-chart"


def _install_dry_run(kube: Kube, *values: str) -> tuple[list[dict[str, Any]], str]:
    """`helm install --dry-run=server` against the API server: the objects and the notes."""
    for name in NAMESPACES:
        created = kube.kubectl("create", "namespace", name)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    result = helm(
        "install", "fioprobe", str(CHART), "--namespace", "fioprobe", "--dry-run=server",
        "--kubeconfig", str(kube.kubeconfig),
        "--set", f"provisioning.namespace={PROVISION_NAMESPACE}", *values,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest, notes = result.stdout.split("NOTES:", 1)
    manifest = manifest.split("MANIFEST:", 1)[1]
    docs = [d for d in yaml.safe_load_all(manifest) if d is not None]
    return docs, " ".join(notes.split())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("namespace", "problem"),
    [
        ("fioprobe-provision", "exists and is not this release's"),
        ("fioprobe-etcd", "is a namespace of its own use"),
        ("kube-public", "is a namespace of its own use"),
        ("fioprobe", "is a namespace of its own use"),
    ],
)
def test_a_test_namespace_that_may_hold_other_workloads_is_refused(
    kube: Kube, namespace: str, problem: str
) -> None:
    """The probe may create and delete any pod of its test namespace: one that exists and is
    not this release's (the manifests' here), or that the deployment or the cluster uses, is
    refused before anything is installed."""
    for name in NAMESPACES:
        created = kube.kubectl("create", "namespace", name)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    result = helm(
        "install", "fioprobe", str(CHART), "--namespace", "fioprobe", "--dry-run=server",
        "--kubeconfig", str(kube.kubeconfig), "--set", f"provisioning.namespace={namespace}",
        "--set-json", f"storageClasses={json.dumps(EXAMPLE_CLASSES['storageClasses'])}",
    )  # fmt: skip
    assert result.returncode != 0
    assert f"provisioning.namespace {namespace} {problem}" in result.stderr, result.stderr


@pytest.mark.slow
def test_the_default_storageclass_is_probed_by_its_name_and_type(kube: Kube) -> None:
    """No storageClasses given: the cluster's default StorageClass, looked up at install, is
    probed as if it had been named (its CronJob, PVC, stream and expected rules), with the
    volume model its provisioner and parameters say; the newest of two defaults wins, as
    Kubernetes picks it; with no default, nothing is probed and the notes say why."""
    classes = [
        ("fioprobe-test-old-default", "true", {"type": "gp2"}),
        ("fioprobe-test-ebs", "true", {"type": "gp3", "iops": "4000", "throughput": "250"}),
        ("fioprobe-test-other", "false", {"type": "io2", "iops": "9000"}),
    ]
    try:
        for name, default, parameters in classes:
            storageclass = {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": name,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": default},
                },
                "provisioner": "ebs.csi.aws.com",
                "parameters": parameters,
            }
            kube.apply(storageclass)
            time.sleep(1.1)  # creationTimestamp has whole seconds: the next one is newer
        docs, notes = _install_dry_run(kube)
        name = "fioprobe-test-ebs"
        assert set(of_kind(docs, "CronJob")) == {f"fioprobe-{name}", "fioprobe-provision"}
        # The provisioning probe provisions the class the chart found, by its real name.
        provision = of_kind(docs, "CronJob")["fioprobe-provision"]["spec"]["jobTemplate"]
        command = provision["spec"]["template"]["spec"]["containers"][0]["command"]
        assert [command[i + 1] for i, a in enumerate(command) if a == "--storageclass"] == [name]
        pvc = of_kind(docs, "PersistentVolumeClaim")[f"fioprobe-{name}"]
        assert pvc["spec"]["storageClassName"] == name
        assert pvc["spec"]["resources"]["requests"]["storage"] == "20Gi"
        assert set(of_kind(docs, "StatefulSet")) == {f"fioprobe-continuous-{name}"}
        # The probes' ConfigMap of the release's namespace (the etcd one has the same name).
        (probes,) = [
            d for d in docs
            if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "fioprobe-config"
            and d["metadata"]["namespace"] == "fioprobe"
        ]  # fmt: skip
        config = yaml.safe_load(probes["data"][f"{name}.yaml"])
        (target,) = config["targets"]
        assert target["name"] == name
        assert target["volume"] == {
            "type": "gp3", "size": "20Gi", "iops": 4000, "throughput": "250Mi",
            "provisioner": "ebs.csi.aws.com", "dedicated": True,
        }  # fmt: skip
        assert [p if isinstance(p, str) else p["name"] for p in target["profiles"]] == [
            "etcd-fsync", "randread-iops",
        ]  # fmt: skip
        expected = of_kind(docs, "PrometheusRule")["fioprobe-expected"]["spec"]["groups"][0]
        assert {"storageclass": name, "profile": "etcd-fsync"} in [
            r.get("labels") for r in expected["rules"]
        ]
        assert f"({name}, volume type gp3)" in notes
        assert (
            f"Provisioning probe: every 10 minutes, a small claim and a pod of {name} in "
            f"namespace {PROVISION_NAMESPACE}, each step timed, both deleted." in notes
        )
        assert "is the cluster's default StorageClass, found at install" in notes

        # No default any more: nothing probed, and the notes say so.
        for old, _, _ in classes[:2]:
            done = kube.kubectl(
                "annotate", "--overwrite", "storageclass", old,
                "storageclass.kubernetes.io/is-default-class=false",
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        docs, notes = _install_dry_run(kube)
        assert of_kind(docs, "CronJob") == {} and of_kind(docs, "StatefulSet") == {}
        assert "No StorageClass is probed: the cluster has no default StorageClass" in notes
    finally:
        for name, _, _ in classes:
            kube.kubectl("delete", "storageclass", name, "--ignore-not-found")


@pytest.mark.slow
def test_the_notes_name_the_release_label_a_prometheus_on_the_cluster_selects(kube: Kube) -> None:
    """kube-prometheus-stack's Prometheus selects only monitors and rules labelled
    release=<its release>: with releaseLabel unset the notes name that Prometheus and the value
    to set, only then; one that selects everything, or the label given, draws no such note."""
    created = kube.kubectl("create", "namespace", "fioprobe-test-monitoring")
    assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    selecting = {"matchLabels": {"release": "kps"}}
    prometheuses = [
        ("kps-prometheus", {"serviceMonitorSelector": selecting, "ruleSelector": selecting}),
        ("everything", {"serviceMonitorSelector": {}, "ruleSelector": {}}),
    ]
    try:
        for name, spec in prometheuses:
            kube.apply({
                "apiVersion": "monitoring.coreos.com/v1",
                "kind": "Prometheus",
                "metadata": {"name": name, "namespace": "fioprobe-test-monitoring"},
                "spec": spec,
            })  # fmt: skip
        _, notes = _install_dry_run(kube)
        assert (
            "Prometheus fioprobe-test-monitoring/kps-prometheus selects only what carries "
            "serviceMonitorSelector release=kps, ruleSelector release=kps: it takes none of "
            "this release's monitors and rules. Set releaseLabel to kps (helm upgrade "
            "--reuse-values --set releaseLabel=kps)"
        ) in notes, notes
        assert "fioprobe-test-monitoring/everything" not in notes, notes
        assert "set releaseLabel to its release" not in notes, notes
        _, notes = _install_dry_run(kube, "--set", "releaseLabel=kps")
        assert "selects only what carries" not in notes, notes
        _, notes = _install_dry_run(kube, "--set", "releaseLabel=other")
        assert "(labelled release=other). Set releaseLabel to kps" in notes, notes
    finally:
        kube.kubectl("delete", "namespace", "fioprobe-test-monitoring", "--wait=false")


@pytest.mark.slow
def test_the_notes_on_openshift_give_the_node_preparation(kube: Kube) -> None:
    """On OpenShift no pod prepares the etcd directories (no SCC should allow relabelling):
    the notes give the step that does, with the release's own paths and user. (OpenShift's SCC
    API is served here by its CRD for this test only.)"""
    crd = REPO / ".tools" / "kube-openshift" / "scc.crd.yaml"
    assert crd.exists(), f"{crd} missing: run make setup (scripts/setup.d/32-openshift-crd.sh)"
    created = kube.kubectl("apply", "--server-side", "-f", str(crd))
    assert created.returncode == 0, created.stderr
    try:
        established = kube.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "-f", str(crd)
        )
        assert established.returncode == 0, established.stderr
        _, notes = _install_dry_run(kube, "--set", "platform=openshift", "--set", "probeUser=1000")
        assert "On OpenShift no pod may create or relabel the node directories" in notes, notes
        assert (
            "install -d -o 1000 -g 1000 -m 0700 /var/lib/etcd-fioprobe /var/lib/fioprobe/state "
            "chcon -t container_file_t /var/lib/etcd-fioprobe /var/lib/fioprobe/state"
        ) in notes, notes
        # The per-node probes' directory too, when they run; etcd's alone off.
        _, notes = _install_dry_run(
            kube, "--set", "platform=openshift", "--set", "etcd.enabled=false",
            "--set", "perNode.enabled=true", "--set-json",
            'perNode.localDisks=[{"name": "nvme", "profiles": ["etcd-fsync"]}]',
        )  # fmt: skip
        assert (
            "install -d -o 65532 -g 65532 -m 0700 /var/lib/fioprobe /var/lib/fioprobe/state"
        ) in notes, notes
    finally:
        kube.kubectl("delete", "-f", str(crd), "--wait=true")
    _, notes = _install_dry_run(kube)
    assert "chcon" not in notes and "created by its prepare step" in notes, notes


@pytest.mark.slow
def test_the_notes_name_a_storageclass_the_cluster_does_not_have(kube: Kube) -> None:
    """A StorageClass named in the values that the cluster lacks is no error at install (it may
    be created next), but its probe would wait on a Pending volume: the notes say so, for that
    class only."""
    kube.apply({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fioprobe-test-present"},
        "provisioner": "example.com/none",
    })  # fmt: skip
    try:
        classes = [
            {"name": "present", "storageClassName": "fioprobe-test-present",
             "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]},
            {"name": "fioprobe-test-absent", "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]},
        ]  # fmt: skip
        _, notes = _install_dry_run(kube, "--set-json", f"storageClasses={json.dumps(classes)}")
        assert (
            "StorageClass fioprobe-test-absent (storageClasses fioprobe-test-absent) does not "
            "exist on this cluster: its probe's volume stays Pending"
        ) in notes, notes
        assert "StorageClass fioprobe-test-present" not in notes, notes
        # A per-node class is named by its own key, and only when the per-node probes run.
        per_node = [{"name": "fioprobe-test-gone", "volume": {"size": "1Gi"},
                     "profiles": ["etcd-fsync"]}]  # fmt: skip
        values = ["--set-json", f"perNode.storageClasses={json.dumps(per_node)}"]
        _, notes = _install_dry_run(kube, *values)
        assert "fioprobe-test-gone" not in notes, notes
        _, notes = _install_dry_run(kube, *values, "--set", "perNode.enabled=true")
        assert (
            "StorageClass fioprobe-test-gone (perNode.storageClasses fioprobe-test-gone) does "
            "not exist on this cluster"
        ) in notes, notes
    finally:
        kube.kubectl("delete", "storageclass", "fioprobe-test-present", "--ignore-not-found")


@pytest.mark.slow
def test_the_notes_say_who_can_change_results_and_what_benchmark_servers_accept(
    kube: Kube,
) -> None:
    """The Pushgateway's port takes pushes and deletes from whoever may scrape it, unless
    pushgateway.auth; a benchmark's fio servers run what they receive, kept to their client
    only where NetworkPolicy is enforced. The notes say both, each only where it applies."""
    _, text = _install_dry_run(kube)
    assert "those pods can change or delete any probe's results" in text, text
    assert "Distributed benchmarks" not in text
    _, text = _install_dry_run(
        kube, "--set", "pushgateway.auth.enabled=true", "--set-json",
        f"benchmarks=[{json.dumps({**BENCH, 'push': False})}]",
    )  # fmt: skip
    assert "change or delete any probe's results" not in text, text
    assert (
        "Distributed benchmarks: q. Their fio servers run every job they receive, commands "
        "included (exec_prerun): only their client may reach them, and that holds only where "
        "the network plugin enforces NetworkPolicy"
    ) in text, text
