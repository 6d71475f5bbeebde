"""The Helm chart and the jsonnet manifests rendered for one configuration, as objects.

Both renderers are the real ones: `helm template` (built by scripts/setup.d/34-helm.sh) and
scripts/generate.d/30-manifests.sh (go-jsonnet). A configuration is a layer over
manifests/config.libsonnet, which is also what the chart's values.yaml holds, so one layer
renders both ways: `--tla-code overrides=<JSON>` for jsonnet, `-f <JSON>` for Helm.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from support.manifests import GENERATE, NOT_OBJECTS
from support.paths import REPO

CHART = REPO / "charts" / "fioprobe"
HELM = REPO / ".tools" / "bin" / "helm"
#: Helm 4 (scripts/setup.d/37-helm4.sh), beside Helm 3: both are supported, both are tested.
HELM4 = REPO / ".tools" / "bin" / "helm4"

#: Labels that only Helm sets: the one difference the chart may have on any object.
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")

#: Per-node probes of a local disk and a StorageClass: a configuration of its own, and part of
#: others.
PER_NODE: dict[str, Any] = {
    "perNode": {
        "enabled": True,
        "expectedNodes": 3,
        "nodeSelector": {"fioprobe.example.com/probe": "true"},
        "tolerations": [
            {"key": "fioprobe.example.com/pool", "operator": "Exists", "effect": "NoSchedule"}
        ],
        "localDisks": [{"name": "node-disk", "profiles": ["etcd-fsync"], "etcdDisk": True}],
        "storageClasses": [
            {
                "name": "gp3",
                "storageClassName": "gp3-csi",
                "volume": {"type": "gp3", "size": "8Gi", "iops": 3000, "throughput": "125Mi"},
                "profiles": ["etcd-fsync", {"name": "randread-iops", "runtime": 5}],
            }
        ],
    }
}

#: Configurations a platform engineer turns on, each a layer over manifests/config.libsonnet:
#: the chart and the manifests render each the same (tests/deploy/test_chart_parity.py), and
#: the chart's objects of each are accepted by a real kube-apiserver (tests/deploy/test_chart.py).
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "openshift": {"platform": "openshift"},
    "openshift-per-node-tls": {
        "platform": "openshift",
        "pushgateway": {"tls": {"enabled": True}},
        **PER_NODE,
    },
    "continuous-off": {"continuous": {"enabled": False}},
    "continuous-storageclasses-only": {
        "continuous": {"etcd": False, "intervalSeconds": 0.5, "stallThresholdSeconds": 0.005}
    },
    "auth-and-tls": {
        "pushgateway": {
            "auth": {"enabled": True},
            "tls": {"enabled": True, "serverName": "pgw.example"},
        }
    },
    "etcd-off": {"etcd": {"enabled": False}},
    "etcd-named-nodes": {
        "etcd": {
            "nodes": ["cp-a.example.com", "cp-b.example.com", "cp-c.example.com"],
            "dataDir": "/var/lib/rancher/rke2/server/db/etcd",
            "hostPath": "/var/lib/rancher/rke2/server/db/fioprobe",
        }
    },
    "etcd-own-roles": {
        "etcd": {"roleLabels": ["node-role.kubernetes.io/etcd", "example.com/etcd"]},
        "apiServer": {"ports": [6443], "cidrs": ["10.0.0.0/24", "fd00::/64"]},
    },
    "etcd-roles-unknown-to-kube-state-metrics": {"etcd": {"roleLabels": ["example.com/etcd"]}},
    "own-schedules": {
        "storageClasses": [
            {
                "name": "gp2",
                "schedule": "7 * * * *",
                "volume": {"type": "gp2", "size": "10Gi"},
                "profiles": ["etcd-fsync", {"name": "randread-iops", "runtime": 5, "size": "16Mi"}],
            },
            {
                "name": "ceph",
                "storageClassName": "ocs-storagecluster-ceph-rbd",
                "volume": {"type": "ceph-rbd", "size": "5Gi", "dedicated": False},
                "profiles": ["etcd-fsync"],
                "etcdDisk": True,
            },
            {"name": "io2", "volume": {"size": "4Gi", "iops": 4000}, "profiles": ["etcd-fsync"]},
        ]
    },
    "per-node": PER_NODE,
    # The provisioning probe: a class off, one shared by two entries, classes of its own, one
    # run per node of one, its deadlines, schedule and namespace, an existing Pushgateway with
    # auth (its arguments).
    "provisioning": {
        "storageClasses": [
            {
                "name": "gp2",
                "volume": {"size": "10Gi"},
                "profiles": ["etcd-fsync"],
                "provision": False,
            },
            {
                "name": "a",
                "storageClassName": "fast",
                "volume": {"size": "1Gi"},
                "profiles": ["etcd-fsync"],
            },
            {
                "name": "b",
                "storageClassName": "fast",
                "volume": {"size": "1Gi"},
                "profiles": ["etcd-fsync"],
            },
        ],
        "provisioning": {
            "namespace": "storage-canary",
            "everyMinutes": 15,
            "schedule": "3 */2 * * *",
            "storageClasses": ["local-path", "fast"],
            "deadlines": {"bound": 60, "volume_deleted": 900},
            "nodes": {"local-path": ["w1", "w2", "w3"]},
            "maxParallel": 2,
        },
        "pushgateway": {"url": "https://pgw.example:9443", "auth": {"enabled": True}},
    },
    "provisioning-off": {"provisioning": {"enabled": False}},
    # An optional key given as null is left out, in lists too (manifests/lib/params.libsonnet).
    "nulls": {
        "storageClasses": [
            {
                "name": "gp2",
                "storageClassName": None,
                "schedule": None,
                "volume": {"type": "gp2", "size": "10Gi", "iops": None, "dedicated": None},
                "profiles": [{"name": "etcd-fsync", "runtime": None, "size": "8Mi"}],
            }
        ],
        "etcd": {"tolerations": [{"key": "dedicated", "operator": "Exists", "value": None}]},
        "pushgateway": {"storageClassName": None, "groupsPerReplica": None},
    },
    "sharded": {
        "pushgateway": {
            "replicas": 3,
            "storageClassName": "fast",
            "resources": {"limits": {"cpu": "2"}},
        }
    },
    "sharded-auto": {
        "pushgateway": {"groupsPerReplica": 2},
        "etcd": {"nodes": ["cp-a.example.com"]},
    },
    "existing-pushgateway": {
        "pushgateway": {"url": "https://pgw.monitoring.svc:9443", "auth": {"enabled": True}}
    },
    "existing-pushgateway-addresses": {
        "pushgateway": {
            "url": "http://pgw.example.internal:9091",
            "cidrs": ["10.20.0.0/16", "192.0.2.7/32"],
        }
    },
    "every-10-minutes": {"everyMinutes": 10},
    "every-15-minutes": {
        "everyMinutes": 15,
        "startingDeadlineSeconds": 300,
        "profileTimeoutSeconds": 90,
    },
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": False},
            "podMonitor": {"labels": {"team": "storage"}, "interval": "5s"},
            "prometheusRule": {"labels": {"role": None, "team": "storage"}},
            "dashboards": {
                "namespace": "grafana",
                "labels": {"grafana_dashboard": None, "dashboards": "fioprobe"},
            },
            "prometheusNamespace": "openshift-user-workload-monitoring",
            "prometheusPodSelector": {"app.kubernetes.io/name": None, "prometheus": "k8s"},
        }
    },
    "prometheus-anywhere": {
        "monitoring": {"prometheusPodSelector": {"app.kubernetes.io/name": None}}
    },
    "without-prometheus-operator": {"monitoring": {"operator": False}},
    "monitoring-off": {
        "monitoring": {
            "serviceMonitor": {"enabled": False},
            "podMonitor": {"enabled": False},
            "prometheusRule": {"enabled": False},
            "dashboards": {"enabled": False},
        }
    },
    "image-and-resources": {
        "image": {"name": "quay.example/fioprobe", "tag": "1.2.3", "pullPolicy": "Always"},
        "probeResources": {"limits": {"cpu": None}, "requests": {"ephemeral-storage": "1Mi"}},
        "probeUser": 1000,
        "dns": {
            "namespace": "openshift-dns",
            "podSelector": {"k8s-app": None, "dns.operator.openshift.io/daemonset-dns": "default"},
            "port": 5353,
        },
    },
}


#: The release's namespace is Helm's (--namespace, --create-namespace): the one object the
#: manifests render and the chart does not. The chart creates the hostPath probes' namespaces
#: (component "probe") and the provisioning probe's (component "provision") as the manifests do.
def not_in_chart(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels", {})
    return obj["kind"] == "Namespace" and labels.get("app.kubernetes.io/component") not in {
        "probe",
        "provision",
    }


Key = tuple[str, str, str]


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def helm(*args: str, timeout: float = 120, binary: Path = HELM) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def helm_template(
    values: dict[str, Any],
    namespace: str = "fioprobe",
    chart: Path = CHART,
    release: str = "fioprobe",
    binary: Path = HELM,
) -> subprocess.CompletedProcess[str]:
    """`helm template` with `values` as the user's values file (Helm 3 unless `binary`)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(values, f)
        f.flush()
        # As on a cluster that serves prometheus-operator's API (the chart renders its objects
        # only there); tests of a cluster without it call helm themselves.
        return helm("template", release, str(chart), "--namespace", namespace, "-f", f.name,
                    "--api-versions", "monitoring.coreos.com/v1", binary=binary)  # fmt: skip


def chart_objects(
    values: dict[str, Any], namespace: str = "fioprobe", chart: Path = CHART
) -> dict[Key, dict[str, Any]]:
    """The chart's objects for `values`, without Helm's own labels."""
    result = helm_template(values, namespace, chart)
    assert result.returncode == 0, result.stderr
    objects = {}
    for doc in yaml.safe_load_all(result.stdout):
        if doc is None:
            continue
        labels = doc["metadata"].get("labels", {})
        for label in HELM_LABELS:
            labels.pop(label, None)
        assert key(doc) not in objects, f"{key(doc)} rendered twice"
        objects[key(doc)] = doc
    return objects


def manifest_objects(overrides: dict[str, Any], out: Path) -> dict[Key, dict[str, Any]]:
    """The jsonnet manifests' objects for `overrides`, without those the chart leaves to Helm."""
    subprocess.run(
        ["bash", str(GENERATE), str(out), "--tla-code", f"overrides={json.dumps(overrides)}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    objects = {}
    for path in sorted((out / "generated").glob("*.yaml")):
        if path.name in NOT_OBJECTS:
            continue
        obj = yaml.safe_load(path.read_text())
        if not not_in_chart(obj):
            objects[key(obj)] = obj
    return objects


def benchmark_objects(
    benchmark: dict[str, Any], overrides: dict[str, Any]
) -> dict[Key, dict[str, Any]]:
    """One distributed benchmark's objects as manifests/distributed.jsonnet renders them."""
    done = subprocess.run(
        [str(REPO / ".tools" / "bin" / "go-jsonnet"), "-J", str(REPO), "-J", str(REPO / "vendor"),
         "--tla-code", f"benchmark={json.dumps(benchmark)}",
         "--tla-code", f"overrides={json.dumps(overrides)}",
         str(REPO / "manifests" / "distributed.jsonnet")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {key(obj): obj for obj in json.loads(done.stdout)["items"]}


def is_benchmark(obj: dict[str, Any]) -> bool:
    """Whether an object belongs to a distributed benchmark (its component's label says so)."""
    component = obj["metadata"].get("labels", {}).get("app.kubernetes.io/component", "")
    return str(component).startswith("distributed-")


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two parsed objects differ, as paths with both values (at most a few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: list[str] = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{path}.{k}: only in {'chart' if k in a else 'manifests'}")
            else:
                found += differences(a[k], b[k], f"{path}.{k}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    if a != b or type(a) is not type(b):
        return [f"{path}: chart {a!r:.200} != manifests {b!r:.200}"]
    return []


def compare(chart: dict[Key, dict[str, Any]], manifests: dict[Key, dict[str, Any]]) -> list[str]:
    """Every difference between the two renderings, object by object."""
    problems = [f"{k}: only in the chart" for k in sorted(set(chart) - set(manifests))]
    problems += [f"{k}: only in the manifests" for k in sorted(set(manifests) - set(chart))]
    for k in sorted(set(chart) & set(manifests)):
        problems += [f"{k}{d}" for d in differences(chart[k], manifests[k])]
    return problems
