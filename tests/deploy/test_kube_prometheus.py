"""manifests/kube-prometheus/example.jsonnet rendered with the real kube-prometheus and applied to
a real kube-apiserver.

kube-prometheus v0.18.0 and its dependencies are vendored by scripts/setup.d/16-kube-prometheus.sh
(pinned in tests/data/kube-prometheus/), the example is rendered with go-jsonnet as
kube-prometheus's build.sh does, with this repository as `fioprobe/` on the import path, as a
user's jsonnet-bundler install would name it. The kube-apiserver is the one of
tests/deploy/test_manifests_apiserver.py (the same fixture: tests/support/kubeapi.py's `kube`).
kube-prometheus's objects are applied for real, server-side (RBAC has to exist for `kubectl
auth can-i` to answer), and fioprobe's own manifests are checked server-side next to them.

Why these checks: kube-prometheus's Prometheus selects ServiceMonitors, PodMonitors and
PrometheusRules everywhere, but may only list endpointslices and pods in the namespaces of
`values.prometheus.namespaces`, one Role each. Without fioprobe's there, every object is accepted
and the Prometheus still never scrapes the Pushgateway or the continuous stream; only its RBAC
shows it.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from support import kubeapi
from support.kubeapi import Kube
from support.paths import GO_JSONNET

VENDOR = REPO / "tests" / "data" / "kube-prometheus" / "vendor"
EXAMPLE = REPO / "manifests" / "kube-prometheus" / "example.jsonnet"
MANIFESTS = REPO / "manifests"
PROMETHEUS_SA = "system:serviceaccount:monitoring:prometheus-k8s"

pytestmark = pytest.mark.slow

#: A kube-apiserver and etcd of this module's own, ready for the generated manifests.
kube = kubeapi.kube

#: Prometheus object field of each monitoring kind: (selector, namespace selector).
SELECTORS = {
    "ServiceMonitor": ("serviceMonitorSelector", "serviceMonitorNamespaceSelector"),
    "PodMonitor": ("podMonitorSelector", "podMonitorNamespaceSelector"),
    "PrometheusRule": ("ruleSelector", "ruleNamespaceSelector"),
}


def render(example: Path, workdir: Path) -> dict[str, dict]:
    """{file name: object} as example.jsonnet writes them (`jsonnet -m`), kube-prometheus's
    `*List` objects (RoleList, ConfigMapList) as they are."""
    for path in (GO_JSONNET, VENDOR / "kube-prometheus" / "main.libsonnet"):
        if not path.exists():
            pytest.fail(
                f"{path} missing: run `make setup` "
                "(scripts/setup.d/31-go-jsonnet.sh, scripts/setup.d/16-kube-prometheus.sh)"
            )
    jpath = workdir / "jpath"
    jpath.mkdir()
    (jpath / "fioprobe").symlink_to(REPO)
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(jpath), "-J", str(VENDOR), str(example)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def objects(rendered: dict[str, dict], prefix: str = "") -> list[dict]:
    """The objects of the files whose names start with `prefix`, in the order of their names,
    the items of `*List` objects one by one."""
    found: list[dict] = []
    for name, obj in sorted(rendered.items()):
        if name.startswith(prefix):
            found.extend(obj["items"] if obj["kind"].endswith("List") else [obj])
    return found


def generated_objects() -> list[dict]:
    """fioprobe's own manifests, as `kubectl apply -k manifests` applies them."""
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    return [yaml.safe_load((MANIFESTS / r).read_text()) for r in kustomization["resources"]]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return render(EXAMPLE, tmp_path_factory.mktemp("kube-prometheus"))


def _apply(kube: Kube, items: list[dict], path: Path, *options: str) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    result = kube.kubectl(
        "apply", "--server-side", "--validate=strict", *options, "-f", str(path), timeout=300
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def applied(
    kube: Kube, rendered: dict[str, dict], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict]:
    """The render applied as kube-prometheus's README says: setup/ (namespace, CRDs, operator)
    first, the rest once the CRDs are established. kube-prometheus's CRDs replace the
    fixture's three (an older prometheus-operator, so its objects are checked against the
    schemas kube-prometheus installs)."""
    d = tmp_path_factory.mktemp("apply")
    setup = objects(rendered, "setup/")
    rest = {name: obj for name, obj in rendered.items() if not name.startswith("setup/")}
    _apply(kube, setup, d / "setup.json")
    crds = [f"crd/{obj['metadata']['name']}" for obj in setup if obj["kind"].endswith("Definition")]
    for _ in range(30):  # a CRD just created has no status yet: ask again (see the fixture)
        waited = kube.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *crds, timeout=90
        )
        if waited.returncode == 0 or "accessor error" not in waited.stderr:
            break
        time.sleep(1)
    assert waited.returncode == 0, waited.stderr
    _apply(kube, objects(rest), d / "rest.json")
    return rendered


def test_the_example_writes_every_component_of_the_manifests() -> None:
    """A component that manifests/main.libsonnet gains (the OpenShift SCC did) must reach the
    example's output too, or a kube-prometheus user silently misses its objects: every
    visible field of main.libsonnet is named in the example's component lists."""
    fields = json.loads(
        subprocess.run(
            [str(GO_JSONNET), "-J", str(REPO), "-e",
             "std.objectFields((import 'manifests/main.libsonnet')())"],
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout
    )  # fmt: skip
    assert "openshift" in fields  # the scan reads the real component list
    source = EXAMPLE.read_text()
    missing = [f for f in fields if f"'{f}'" not in source and f"fioprobe.{f}[" not in source]
    assert missing == [], f"components of main.libsonnet the example does not write: {missing}"


def test_fioprobe_rules_and_dashboards_are_in_the_render(rendered: dict[str, dict]) -> None:
    """addMixin's PrometheusRule holds the mixin's groups, the same as every other install
    loads, and the expected probes of the deployed ones; kube-prometheus's Grafana provisions
    the dashboards in the `fioprobe` folder."""
    rule = rendered["fioprobe-prometheusRule"]
    assert (rule["kind"], rule["metadata"]["namespace"]) == ("PrometheusRule", "monitoring")
    groups = {group["name"]: group for group in rule["spec"]["groups"]}
    expected = groups.pop("fioprobe.expected")
    mixin = yaml.safe_load((REPO / "alerts" / "out" / "rules.yaml").read_text())["groups"]
    assert groups == {group["name"]: group for group in mixin}
    deployed = yaml.safe_load(
        (MANIFESTS / "generated" / "monitoring-expectedrule.yaml").read_text()
    )
    assert [expected] == deployed["spec"]["groups"]

    dashboards = {
        key: json.loads(text)
        for config_map in rendered["grafana-dashboardDefinitions"]["items"]
        for key, text in config_map["data"].items()
    }
    grafana = rendered["grafana-deployment"]["spec"]["template"]["spec"]["containers"][0]
    mounts = {mount["mountPath"] for mount in grafana["volumeMounts"]}
    providers = yaml.safe_load(rendered["grafana-dashboardSources"]["data"]["dashboards.yaml"])
    folders = {p["folder"]: p["options"]["path"] for p in providers["providers"]}
    assert folders["fioprobe"] == "/grafana-dashboard-definitions/fioprobe"
    files = sorted((REPO / "dashboards" / "out").glob("*.json"))
    assert files
    for path in files:
        assert dashboards[path.name] == json.loads(path.read_text()), path.name
        assert f"/grafana-dashboard-definitions/fioprobe/{path.stem}" in mounts


def _scrape_permissions(prometheus: dict, monitors: list[dict]) -> set[tuple[str, str, str]]:
    """(namespace, verb, resource) the Prometheus needs for these monitors: service discovery
    lists and watches, in every namespace a monitor's namespaceSelector names (its own without
    one), endpointslices (or endpoints) with their services and pods for a ServiceMonitor, pods
    for a PodMonitor."""
    slices = (
        "endpointslices.discovery.k8s.io"
        if prometheus["spec"].get("serviceDiscoveryRole") == "EndpointSlice"
        else "endpoints"
    )
    needed: set[tuple[str, str, str]] = set()
    for monitor in monitors:
        selector = monitor["spec"].get("namespaceSelector") or {}
        assert not selector.get("any"), f"{monitor['metadata']['name']}: every namespace"
        namespaces = selector.get("matchNames") or [monitor["metadata"]["namespace"]]
        resources = (
            [slices, "services", "pods"] if monitor["kind"] == "ServiceMonitor" else ["pods"]
        )
        needed |= {
            (ns, verb, r) for ns in namespaces for verb in ("list", "watch") for r in resources
        }
    return needed


def _can_i(kube: Kube, namespace: str, verb: str, resource: str) -> bool:
    result = kube.kubectl("auth", "can-i", verb, resource, "-n", namespace, "--as", PROMETHEUS_SA)
    assert result.stdout.strip() in ("yes", "no"), result.stderr
    return result.stdout.strip() == "yes"


def _fioprobe_objects(applied: dict[str, dict]) -> list[dict]:
    """fioprobe's objects of the render and of its own manifests."""
    return objects(applied, "fioprobe-") + generated_objects()


def test_prometheus_may_discover_fioprobe_targets(kube: Kube, applied: dict[str, dict]) -> None:
    """The Pushgateway's ServiceMonitor and the continuous stream's PodMonitor, the example's
    and those of manifests/generated: kube-prometheus's Prometheus may list and watch what they
    select, and nothing in a namespace it was not given (so the check can fail)."""
    monitors = [
        obj for obj in _fioprobe_objects(applied) if obj["kind"] in ("ServiceMonitor", "PodMonitor")
    ]
    assert {obj["kind"] for obj in monitors} == {"ServiceMonitor", "PodMonitor"}
    needed = _scrape_permissions(applied["prometheus-prometheus"], monitors)
    assert {ns for ns, _, _ in needed} >= {"fioprobe", "fioprobe-etcd"}
    denied = sorted(p for p in needed if not _can_i(kube, *p))
    assert denied == [], f"{PROMETHEUS_SA} may not (namespace, verb, resource): {denied}"
    assert not _can_i(kube, "kube-public", "list", "pods")


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector: null selects nothing, {} everything."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, values = expression["key"], expression.get("values", [])
        holds = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[expression["operator"]]
        if not holds:
            return False
    return True


def test_prometheus_selects_fioprobe_monitors_and_rules(
    kube: Kube, applied: dict[str, dict]
) -> None:
    """The Prometheus object's selectors and namespace selectors (the operator's rules: a null
    namespace selector is the Prometheus's own namespace) match fioprobe's ServiceMonitor,
    PodMonitor and PrometheusRules, by their labels and their namespaces' labels as the
    kube-apiserver holds them."""
    prometheus = applied["prometheus-prometheus"]
    spec = prometheus["spec"]
    namespace_labels: dict[str, dict[str, str]] = {}
    checked: set[str] = set()
    for obj in _fioprobe_objects(applied):
        if obj["kind"] not in SELECTORS:
            continue
        selector, namespace_selector = SELECTORS[obj["kind"]]
        meta = obj["metadata"]
        where = f"{obj['kind']} {meta['namespace']}/{meta['name']}"
        assert _selects(spec.get(selector), meta.get("labels", {})), f"{where}: {selector}"
        ns = meta["namespace"]
        if ns not in namespace_labels:
            got = kube.kubectl("get", "namespace", ns, "-o", "json")
            assert got.returncode == 0, got.stderr
            namespace_labels[ns] = json.loads(got.stdout)["metadata"].get("labels", {})
        if spec.get(namespace_selector) is None:
            assert ns == prometheus["metadata"]["namespace"], f"{where}: {namespace_selector}"
        else:
            assert _selects(spec[namespace_selector], namespace_labels[ns]), where
        checked.add(obj["kind"])
    assert checked == set(SELECTORS)


def test_fioprobe_manifests_are_accepted_beside_kube_prometheus(
    kube: Kube, applied: dict[str, dict]
) -> None:
    """fioprobe's own manifests (the standalone install, `kubectl apply -k manifests`) against
    the CRDs kube-prometheus installed. A dry run: the example's objects of the same names are
    there for real."""
    result = kube.kubectl(
        "apply", "--server-side", "--dry-run=server", "--validate=strict", "-k", str(MANIFESTS)
    )
    assert result.returncode == 0, result.stderr
