"""The continuous stream's manifests (manifests/components/continuous.libsonnet).

A DaemonSet on the etcd nodes and a StatefulSet per StorageClass run `fioprobe continuous`;
a PodMonitor, or a plain Prometheus scrape configuration, scrapes exactly those pods. Checked
on the committed files and on renderings with overrides: who is selected, where the pods run
and write, the generated fioprobe configuration (with fioprobe's strict loader), the flags
(with fioprobe's own argument parser), the NetworkPolicies, the switches; and the DaemonSet's
command run for real and scraped. Server-side validation and Pod Security are in
test_manifests_apiserver.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from fioprobe.cli.main import build_parser
from fioprobe.target.config import load_config
from support import services
from support.manifests import GENERATED, MANIFESTS, load_objects, pod_spec, render
from support.paths import GO_JSONNET

SCRAPE_CONFIG = "continuous-scrape-config.yaml"
COMPONENT = "continuous"
#: Renders without the mixin's rules and dashboards: they do not depend on the stream's keys
#: and take most of the rendering time.
NO_MIXIN: dict[str, Any] = {
    "monitoring": {"prometheusRule": {"enabled": False}, "dashboards": {"enabled": False}}
}


def shipped_config() -> dict[str, Any]:
    """manifests/config.libsonnet merged over the defaults, as the committed files use it."""
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", "(import 'manifests/main.libsonnet')().config"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    config: dict[str, Any] = json.loads(proc.stdout)
    return config


def rendered(tmp_path: Path, overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return load_objects(render(tmp_path, json.dumps({**NO_MIXIN, **overrides})))


def pod_labels(obj: dict[str, Any]) -> dict[str, str]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    return obj["spec"]["template"]["metadata"]["labels"]


def streams_of_kind(objects: dict[str, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The stream workloads of one kind."""
    return [o for o in streams(objects).values() if o["kind"] == kind]


def workloads(objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: o for name, o in objects.items() if pod_spec(o) is not None}


def streams(objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The stream workloads, known by kind and command (not by the labels under test)."""
    return {
        name: o
        for name, o in workloads(objects).items()
        if o["kind"] in ("DaemonSet", "StatefulSet")
        and pod_spec(o)["containers"][0]["command"][:2] == ["fioprobe", "continuous"]  # type: ignore[index]
    }


def of_kind(objects: dict[str, dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects.values() if o["kind"] == kind]


def container_ports(obj: dict[str, Any]) -> set[str]:
    spec = pod_spec(obj)
    assert spec is not None
    return {p["name"] for c in spec["containers"] for p in c.get("ports", []) if "name" in p}


def stream_config(objects: dict[str, dict[str, Any]], obj: dict[str, Any]) -> dict[str, Any]:
    """The fioprobe configuration a stream pod mounts, and where its probe volume is."""
    spec = pod_spec(obj)
    assert spec is not None
    (container,) = spec["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volume = {v["name"]: v for v in spec["volumes"]}["config"]["configMap"]
    (item,) = volume["items"]
    (cm,) = [
        o
        for o in of_kind(objects, "ConfigMap")
        if o["metadata"]["name"] == volume["name"]
        and o["metadata"]["namespace"] == obj["metadata"]["namespace"]
    ]
    assert container["command"][2:4] == ["--config", f"{mounts['config']}/{item['path']}"]
    return {"text": cm["data"][item["key"]], "probe_mount": mounts["probe"]}


# --- the PodMonitor and the scrape configuration select exactly the stream pods -------------


def test_podmonitor_selects_exactly_the_stream_pods() -> None:
    objects = load_objects()
    mine = streams(objects)
    assert sorted(o["kind"] for o in mine.values()) == ["DaemonSet", "StatefulSet", "StatefulSet"]
    (monitor,) = of_kind(objects, "PodMonitor")
    spec = monitor["spec"]
    selector = spec["selector"]["matchLabels"]
    namespaces = set(spec["namespaceSelector"]["matchNames"])
    assert namespaces == {o["metadata"]["namespace"] for o in mine.values()}
    assert namespaces == {"fioprobe", "fioprobe-etcd"}
    # Selected: every stream pod, and no other pod of any namespace.
    for name, obj in workloads(objects).items():
        selected = (
            selector.items() <= pod_labels(obj).items()
            and obj["metadata"]["namespace"] in namespaces
        )
        assert selected == (name in mine), name
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True
    assert endpoint["interval"] == "15s" and endpoint["path"] == "/metrics"
    # Its port is a named container port of every stream pod and of no other pod.
    for name, obj in workloads(objects).items():
        assert (endpoint["port"] in container_ports(obj)) == (name in mine), name
    # The label that selects every stream pod (and the PodMonitor's own).
    assert selector["app.kubernetes.io/component"] == COMPONENT
    assert monitor["metadata"]["namespace"] == "fioprobe"


def _relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus' relabelling for the actions the scrape config uses (keep, drop, replace
    with the default regex, separator and replacement); None: the target is dropped."""
    labels = dict(labels)
    for rule in rules:
        value = ";".join(labels.get(name, "") for name in rule["source_labels"])
        action = rule.get("action", "replace")
        matched = re.fullmatch(rule.get("regex", "(.*)"), value) is not None
        if action == "keep" and not matched:
            return None
        if action == "drop" and matched:
            return None
        if action == "replace":
            assert set(rule) <= {"action", "source_labels", "target_label"}, rule
            labels[rule["target_label"]] = value
    return labels


def _discovered(objects: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """What Prometheus' pod discovery yields for the pods of every workload: one target per
    container port (and one per container without ports), with the pod's labels as meta
    labels."""
    found = []
    for name, obj in workloads(objects).items():
        spec = pod_spec(obj)
        assert spec is not None
        meta = {
            "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
            for k, v in pod_labels(obj).items()
        }
        meta |= {
            "__meta_kubernetes_namespace": obj["metadata"]["namespace"],
            "__meta_kubernetes_pod_name": obj["metadata"]["name"] + "-0",
            "__meta_kubernetes_pod_phase": "Running",
            "workload": name,
        }
        for container in spec["containers"]:
            ports = container.get("ports") or [{}]
            for port in ports:
                found.append(
                    meta
                    | {
                        "__meta_kubernetes_pod_container_name": container["name"],
                        "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    }
                )
    return found


def test_scrape_config_selects_the_same_pods_as_the_podmonitor() -> None:
    objects = load_objects()
    (monitor,) = of_kind(objects, "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    document = yaml.safe_load((GENERATED / SCRAPE_CONFIG).read_text())
    (job,) = document["scrape_configs"]
    assert job["honor_labels"] is True
    assert job["scrape_interval"] == endpoint["interval"]
    assert job["metrics_path"] == endpoint["path"]
    (sd,) = job["kubernetes_sd_configs"]
    assert sd["role"] == "pod"
    namespaces = set(monitor["spec"]["namespaceSelector"]["matchNames"])
    assert set(sd["namespaces"]["names"]) == namespaces
    targets = [
        t
        for t in _discovered(objects)
        if t["__meta_kubernetes_namespace"] in namespaces
        and _relabel(job["relabel_configs"], t) is not None
    ]
    # One target per stream pod, on its metrics port, labelled with namespace and pod.
    assert sorted(t["workload"] for t in targets) == sorted(streams(objects))
    for target in targets:
        assert target["__meta_kubernetes_pod_container_port_name"] == endpoint["port"]
        labels = _relabel(job["relabel_configs"], target)
        assert labels is not None
        assert labels["namespace"] == target["__meta_kubernetes_namespace"]
        assert labels["pod"] == target["__meta_kubernetes_pod_name"]
    # A finished pod is not scraped.
    finished = targets[0] | {"__meta_kubernetes_pod_phase": "Succeeded"}
    assert _relabel(job["relabel_configs"], finished) is None


def test_scrape_config_is_a_valid_prometheus_configuration(tmp_path: Path) -> None:
    """As docs/MANIFESTS.md says to use it: its jobs under a Prometheus' scrape_configs.

    Debian's Prometheus is built without Kubernetes discovery (promtool refuses the
    `kubernetes_sd_configs` key), so promtool checks the job with a static target in its
    place: the relabelling rules, honor_labels, interval and path; the discovery block itself
    is compared above, key by key."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is missing: run scripts/setup.sh"
    document = yaml.safe_load((GENERATED / SCRAPE_CONFIG).read_text())
    (job,) = document["scrape_configs"]
    assert job.pop("kubernetes_sd_configs") == [
        {"role": "pod", "namespaces": {"names": ["fioprobe", "fioprobe-etcd"]}}
    ]
    job["static_configs"] = [{"targets": ["127.0.0.1:9436"]}]
    (path := tmp_path / "prometheus.yml").write_text(yaml.safe_dump(document))
    checked = subprocess.run(
        [promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout + checked.stderr


# --- where the streams run and write ----------------------------------------------------------


def test_etcd_stream_runs_on_the_etcd_nodes_beside_the_etcd_probes() -> None:
    config = shipped_config()
    objects = load_objects()
    (daemonset,) = streams_of_kind(objects, "DaemonSet")
    spec = pod_spec(daemonset)
    assert spec is not None
    assert daemonset["metadata"]["namespace"] == config["etcd"]["namespace"] == "fioprobe-etcd"
    # The nodes that carry a control-plane role label, whatever they are called.
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchExpressions": [{"key": label, "operator": "Exists"}]}
        for label in config["etcd"]["roleLabels"]
    ]
    assert spec["tolerations"] == config["etcd"]["tolerations"]
    # The same nodes, tolerations and directory as the etcd probes' DaemonSet, and the same
    # step creating it.
    (probes,) = [
        o
        for o in of_kind(objects, "DaemonSet")
        if o["metadata"]["namespace"] == config["etcd"]["namespace"] and o not in [daemonset]
    ]
    probe_spec = pod_spec(probes)
    assert probe_spec is not None
    assert probe_spec["affinity"] == spec["affinity"]
    assert probe_spec["tolerations"] == spec["tolerations"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["probe"] == {v["name"]: v for v in probe_spec["volumes"]}["probe"]
    assert volumes["probe"]["hostPath"] == {
        "path": config["etcd"]["hostPath"],
        "type": "DirectoryOrCreate",
    }
    (prepare,) = spec["initContainers"]
    assert prepare["command"] == [
        "fioprobe", "prepare-dirs", "--owner", "65532",
        "--path", f"/prepare/probe={config['etcd']['hostPath']}",
    ]  # fmt: skip
    # etcd's data directory, read-only, for the same-filesystem check.
    assert volumes["etcd-data"]["hostPath"] == {"path": "/var/lib/etcd", "type": "Directory"}
    (container,) = spec["containers"]
    assert {"name": "etcd-data", "mountPath": "/etcd-data", "readOnly": True} in (
        container["volumeMounts"]
    )
    assert 'etcd_data_dir: "/etcd-data"' in stream_config(objects, daemonset)["text"]
    # One pod per node at a time: the old one has removed its file before the next starts.
    assert daemonset["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1}
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels(daemonset).items()


def test_etcd_stream_follows_named_etcd_nodes(tmp_path: Path) -> None:
    """etcd.nodes names the nodes instead of the role: the stream follows them too."""
    objects = rendered(tmp_path, {"etcd": {"nodes": ["cp-a.example.com", "cp-b.example.com"]}})
    (daemonset,) = streams_of_kind(objects, "DaemonSet")
    spec = pod_spec(daemonset)
    assert spec is not None
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # By the Node's name, which the pod's NODE_NAME and the members compare (the hostname
    # label can differ from it).
    assert term == {
        "matchFields": [
            {
                "key": "metadata.name",
                "operator": "In",
                "values": ["cp-a.example.com", "cp-b.example.com"],
            }
        ]
    }


def test_one_statefulset_per_storageclass_with_its_own_small_pvc() -> None:
    config = shipped_config()
    objects = load_objects()
    statefulsets = {
        o["metadata"]["labels"]["app.kubernetes.io/instance"]: o
        for o in of_kind(objects, "StatefulSet")
    }
    assert sorted(statefulsets) == sorted(sc["name"] for sc in config["storageClasses"])
    probe_pvcs = {
        o["metadata"]["labels"]["app.kubernetes.io/instance"]: o
        for o in of_kind(objects, "PersistentVolumeClaim")
        if o["metadata"]["labels"]["app.kubernetes.io/component"] == "probe"
    }
    services_ = {o["metadata"]["name"]: o for o in of_kind(objects, "Service")}
    for name, sts in statefulsets.items():
        spec = sts["spec"]
        assert sts["metadata"]["namespace"] == config["namespace"]
        assert spec["replicas"] == 1
        (claim,) = spec["volumeClaimTemplates"]
        # On the StorageClass the probe's PVC uses, at continuous.pvcSize.
        assert claim["spec"]["storageClassName"] == probe_pvcs[name]["spec"]["storageClassName"]
        assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
        assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
        mounts = {m["name"] for m in pod_spec(sts)["containers"][0]["volumeMounts"]}  # type: ignore[index]
        assert claim["metadata"]["name"] in mounts
        # Nothing on the volume is worth keeping: it goes with the StatefulSet.
        assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Delete"}
        # Its governing Service exists, headless, in the same namespace.
        service = services_[spec["serviceName"]]
        assert service["metadata"]["namespace"] == sts["metadata"]["namespace"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"].items() <= pod_labels(sts).items()
        assert spec["selector"]["matchLabels"].items() <= pod_labels(sts).items()
        # fsGroup: the fresh PVC's root becomes writable by the stream's user.
        security = pod_spec(sts)["securityContext"]  # type: ignore[index]
        assert security["fsGroup"] == security["runAsUser"] == config["probeUser"]
    # Selectors of different StatefulSets never overlap.
    for a in statefulsets.values():
        for b in statefulsets.values():
            if a is not b:
                assert not a["spec"]["selector"]["matchLabels"].items() <= pod_labels(b).items()


def test_storage_class_name_and_pvc_size_are_the_configured_ones(tmp_path: Path) -> None:
    objects = rendered(
        tmp_path,
        {
            "storageClasses": [
                {
                    "name": "fast",
                    "storageClassName": "gp3-fast",
                    "volume": {"type": "gp3", "size": "20Gi"},
                    "profiles": ["etcd-fsync"],
                    "etcdDisk": True,
                },
                {
                    "name": "ceph",
                    "volume": {"type": "ceph-rbd", "size": "1Gi"},
                    "profiles": ["etcd-fsync"],
                },
            ],
            "continuous": {"pvcSize": "2Gi"},
        },
    )
    claims = {
        o["metadata"]["name"]: o["spec"]["volumeClaimTemplates"][0]["spec"]
        for o in of_kind(objects, "StatefulSet")
    }
    assert claims == {
        "fioprobe-continuous-fast": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gp3-fast",
            "resources": {"requests": {"storage": "2Gi"}},
        },
        "fioprobe-continuous-ceph": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "ceph",
            "resources": {"requests": {"storage": "2Gi"}},
        },
    }


# --- the generated fioprobe configuration -----------------------------------------------------


def _loaded(tmp_path: Path, objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{workload file: (its fioprobe config loaded by the strict loader, probe mount)}."""
    loaded = {}
    for name, obj in streams(objects).items():
        found = stream_config(objects, obj)
        (path := tmp_path / f"{name}.config.yaml").write_text(found["text"])
        loaded[name] = (load_config(path), found["probe_mount"])
    return loaded


def test_every_stream_config_loads_with_fioprobes_strict_loader(tmp_path: Path) -> None:
    config = shipped_config()
    objects = load_objects()
    loaded = _loaded(tmp_path, objects)
    assert len(loaded) == 3
    by_name = {}
    for name, (fioprobe_config, probe_mount) in loaded.items():
        (target,) = fioprobe_config.targets
        # The stream writes where the probe volume is mounted.
        assert str(target.directory) == probe_mount, name
        by_name[target.name] = (target, objects[name])
    etcd_target, daemonset = by_name[config["etcd"]["name"]]
    assert daemonset["kind"] == "DaemonSet"
    assert etcd_target.node_local is True and etcd_target.etcd_disk is True
    assert etcd_target.volume.type == config["etcd"]["volume"]["type"]
    for sc in config["storageClasses"]:
        target, sts = by_name[sc["name"]]
        assert sts["kind"] == "StatefulSet"
        assert target.node_local is False
        assert target.etcd_disk is sc["etcdDisk"] is False
        assert target.volume.type == sc["volume"]["type"]
    # The stream never pushes: no credential file is named even with auth on (none is
    # mounted into its pods).
    for name in loaded:
        assert "_file" not in stream_config(objects, objects[name])["text"], name


def test_etcd_disk_follows_the_storageclass_entry(tmp_path: Path) -> None:
    objects = rendered(
        tmp_path,
        {
            "storageClasses": [
                {
                    "name": "etcd-volume",
                    "volume": {"type": "gp3", "size": "20Gi"},
                    "profiles": ["etcd-fsync"],
                    "etcdDisk": True,
                },
            ],
            "pushgateway": {"auth": {"enabled": True}, "tls": {"enabled": True}},
        },
    )
    loaded = _loaded(tmp_path, objects)
    targets = {c.targets[0].name: c.targets[0] for c, _ in loaded.values()}
    assert targets["etcd-volume"].etcd_disk is True
    assert targets["etcd-volume"].node_local is False
    assert targets["etcd-disk"].etcd_disk is True and targets["etcd-disk"].node_local is True
    for obj in streams(objects).values():
        spec = pod_spec(obj)
        assert spec is not None
        assert not [v for v in spec["volumes"] if "secret" in v], obj["metadata"]["name"]


# --- the command and its flags -----------------------------------------------------------------

DEFAULT_COMMAND = [
    "fioprobe", "continuous", "--config", "/etc/fioprobe/config.yaml", "--listen", ":9436",
    "--interval", "1", "--write-size", "2300", "--file-size", "4Mi", "--stall-threshold", "0.01",
]  # fmt: skip


def test_the_committed_command_is_the_default_one_and_fioprobe_parses_it() -> None:
    objects = load_objects()
    for name, obj in streams(objects).items():
        (container,) = pod_spec(obj)["containers"]  # type: ignore[index]
        assert container["command"] == DEFAULT_COMMAND, name
        assert "args" not in container
        (port,) = container["ports"]
        assert port == {"name": "metrics", "containerPort": 9436, "protocol": "TCP"}
        env = {e["name"]: e for e in container["env"]}
        assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    args = build_parser().parse_args(DEFAULT_COMMAND[1:])
    assert (args.interval, args.write_size, args.file_size) == (1.0, 2300, 4 * 1024 * 1024)
    assert args.stall_threshold == 0.01 and args.listen == ("0.0.0.0", 9436)


def test_the_flags_follow_the_continuous_keys(tmp_path: Path) -> None:
    objects = rendered(
        tmp_path,
        {
            "continuous": {
                "port": 9500,
                "intervalSeconds": 0.5,
                "writeSize": 4096,
                "fileSize": "1.5Mi",
                "stallThresholdSeconds": 0.005,
                "resources": {"limits": {"memory": "96Mi"}},
            },
            "monitoring": {**NO_MIXIN["monitoring"], "podMonitor": {"interval": "10s"}},
        },
    )
    mine = streams(objects)
    assert len(mine) == 3
    for name, obj in mine.items():
        (container,) = pod_spec(obj)["containers"]  # type: ignore[index]
        command = container["command"]
        assert command == [
            "fioprobe", "continuous", "--config", "/etc/fioprobe/config.yaml",
            "--listen", ":9500", "--interval", "0.5", "--write-size", "4096",
            "--file-size", "1.5Mi", "--stall-threshold", "0.005",
        ], name  # fmt: skip
        args = build_parser().parse_args(command[1:])
        assert args.listen == ("0.0.0.0", 9500) and args.interval == 0.5
        assert args.write_size == 4096 and args.file_size == 1536 * 1024
        assert args.stall_threshold == 0.005
        assert container["ports"][0]["containerPort"] == 9500
        # No CPU limit by default: a CFS quota would throttle the writer's fdatasync wake-ups
        # along with the server's work (docs/CONTINUOUS.md); the memory limit is merged in.
        assert container["resources"] == {
            "requests": {"cpu": "10m", "memory": "48Mi"},
            "limits": {"memory": "96Mi"},
        }
    for policy in of_kind(objects, "NetworkPolicy"):
        if policy["metadata"]["name"] == "fioprobe-continuous":
            assert policy["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9500}]
    (monitor,) = of_kind(objects, "PodMonitor")
    assert monitor["spec"]["podMetricsEndpoints"][0]["interval"] == "10s"
    scrape = yaml.safe_load((tmp_path / "generated" / SCRAPE_CONFIG).read_text())
    assert scrape["scrape_configs"][0]["scrape_interval"] == "10s"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            "{ continuous: { fileSize: '4 MB' } }",
            "continuous.fileSize: must be a whole number of bytes from 64Ki to 1Gi, a quantity "
            'like 4Mi or 65536, got "4 MB"',
        ),
        (
            "{ continuous: { fileSize: '2Gi' } }",
            "continuous.fileSize: must be a whole number of bytes from 64Ki to 1Gi, a quantity "
            'like 4Mi or 65536, got "2Gi"',
        ),
        (
            "{ continuous: { stallThresholdSeconds: 0 } }",
            "continuous.stallThresholdSeconds: must be from 0.0001 to 60, got 0",
        ),
        (
            "{ continuous: { fileSize: '64Ki', writeSize: 1048576 } }",
            "continuous.fileSize (64Ki) must hold at least one write of continuous.writeSize "
            "(1048576 bytes)",
        ),
        (
            "{ monitoring: { podMonitor: { enable: false } } }",
            "monitoring.podMonitor.enable: unknown key, did you mean enabled? "
            "(expected one of: enabled, interval, labels)",
        ),
    ],
)
def test_values_fioprobe_would_refuse_stop_the_rendering(
    tmp_path: Path, overrides: str, message: str
) -> None:
    """A value `fioprobe continuous` refuses would stop every stream pod at its start: it
    stops `make generate` instead, with the key's name."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/generate.d/30-manifests.sh"), str(tmp_path),
         "--tla-code", f"overrides={overrides}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [f"RUNTIME ERROR: fioprobe manifests config: {message}"]


# --- switches -------------------------------------------------------------------------------


def _stream_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.yaml") if p.name.startswith("continuous"))


def test_continuous_enabled_false_removes_everything(tmp_path: Path) -> None:
    out = render(tmp_path, json.dumps({**NO_MIXIN, "continuous": {"enabled": False}}))
    assert _stream_files(out) == []
    for name, obj in load_objects(out).items():
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] != COMPONENT, name
        assert obj["kind"] not in ("StatefulSet", "PodMonitor"), name
        assert obj["kind"] != "DaemonSet" or obj["metadata"]["name"] == "fioprobe-etcd", name
    kustomization = (tmp_path / "kustomization.yaml").read_text()
    assert "continuous" not in kustomization
    # Everything else is as before.
    with_stream = render(tmp_path / "with", json.dumps(NO_MIXIN))
    assert sorted(p.name for p in out.glob("*.yaml")) == sorted(
        set(p.name for p in with_stream.glob("*.yaml")) - set(_stream_files(with_stream))
    )


@pytest.mark.parametrize(
    ("overrides", "kinds", "namespaces"),
    [
        ({"continuous": {"etcd": False}}, ["StatefulSet", "StatefulSet"], ["fioprobe"]),
        ({"etcd": {"enabled": False}}, ["StatefulSet", "StatefulSet"], ["fioprobe"]),
        ({"continuous": {"storageClasses": False}}, ["DaemonSet"], ["fioprobe-etcd"]),
        ({"storageClasses": []}, ["DaemonSet"], ["fioprobe-etcd"]),
    ],
)
def test_each_half_can_be_switched_off(
    tmp_path: Path, overrides: dict[str, Any], kinds: list[str], namespaces: list[str]
) -> None:
    objects = rendered(tmp_path, overrides)
    assert sorted(o["kind"] for o in streams(objects).values()) == kinds
    (monitor,) = of_kind(objects, "PodMonitor")
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == namespaces
    scrape = yaml.safe_load((tmp_path / "generated" / SCRAPE_CONFIG).read_text())
    assert scrape["scrape_configs"][0]["kubernetes_sd_configs"][0]["namespaces"]["names"] == (
        namespaces
    )
    # Objects of the stream exist only in a namespace with stream pods; the headless
    # Service only beside a StatefulSet.
    for obj in objects.values():
        if obj["metadata"]["labels"]["app.kubernetes.io/component"] == COMPONENT:
            assert obj["metadata"]["namespace"] in [*namespaces, "fioprobe"], obj["kind"]
            if obj["metadata"]["namespace"] not in namespaces:
                assert obj["kind"] == "PodMonitor"
    has_statefulset = "StatefulSet" in kinds
    assert any(o["kind"] == "Service" and o["metadata"]["name"] == "fioprobe-continuous"
               for o in objects.values()) == has_statefulset  # fmt: skip


def test_podmonitor_switch_keeps_the_scrape_config(tmp_path: Path) -> None:
    """Without prometheus-operator: no PodMonitor, the plain scrape config instead."""
    monitoring = {"podMonitor": {"enabled": False, "labels": {"team": "storage"}}}
    objects = rendered(tmp_path, {"monitoring": {**NO_MIXIN["monitoring"], **monitoring}})
    assert of_kind(objects, "PodMonitor") == []
    assert len(streams(objects)) == 3
    assert (tmp_path / "generated" / SCRAPE_CONFIG).exists()
    labelled = rendered(
        tmp_path / "labelled", {"monitoring": {"podMonitor": {"labels": {"a": "b"}}}}
    )
    (monitor,) = of_kind(labelled, "PodMonitor")
    assert monitor["metadata"]["labels"]["a"] == "b"


# --- network policy and pod settings ---------------------------------------------------------


def test_stream_pods_accept_only_prometheus_on_the_metrics_port_and_connect_nowhere() -> None:
    objects = load_objects()
    mine = streams(objects)
    policies = of_kind(objects, "NetworkPolicy")
    for name, obj in mine.items():
        namespace = obj["metadata"]["namespace"]
        selecting = [
            p
            for p in policies
            if p["metadata"]["namespace"] == namespace
            and p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(obj).items()
        ]
        # Exactly one policy applies (policies add up: a probe policy would add its egress).
        (policy,) = selecting
        spec = policy["spec"]
        assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"], name
        assert spec["egress"] == [], name
        (rule,) = spec["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": 9436}]
        # The Prometheus pods prometheus-operator runs, in the monitoring namespace (a label
        # alone is anyone's to set).
        assert rule["from"] == [
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            }
        ]
    # The Pushgateway's policy admits Prometheus the same way.
    (pushgateway,) = [p for p in policies if p["metadata"]["name"] == "fioprobe-pushgateway"]
    assert rule["from"][0] in pushgateway["spec"]["ingress"][0]["from"]


def test_stream_pods_are_small_and_stop_fast() -> None:
    config = shipped_config()
    objects = load_objects()
    accounts = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in of_kind(objects, "ServiceAccount")
    }
    for name, obj in streams(objects).items():
        spec = pod_spec(obj)
        assert spec is not None
        # SIGTERM ends the stream within 2 s.
        assert spec["terminationGracePeriodSeconds"] <= 10, name
        account = accounts[(obj["metadata"]["namespace"], spec["serviceAccountName"])]
        assert account["automountServiceAccountToken"] is False
        assert spec["automountServiceAccountToken"] is False
        (container,) = spec["containers"]
        assert container["resources"] == config["continuous"]["resources"], name
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}
        # Probed on /metrics, which never waits for a writer; liveness only after minutes.
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}, name
        live = container["livenessProbe"]
        assert live["periodSeconds"] * live["failureThreshold"] >= 120, name


def test_kube_prometheus_part_deploys_the_stream_and_its_podmonitor() -> None:
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e",
         "local f = (import 'manifests/kube-prometheus/fioprobe.libsonnet')();"
         "{ pm: f.continuous.podMonitor, ns: f.continuous.namespaces,"
         "  kinds: [f.continuous[g][k].kind for g in ['etcd', 'storageClasses']"
         "          for k in std.objectFields(f.continuous[g])] }"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    parts = json.loads(proc.stdout)
    assert parts["pm"]["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    assert parts["ns"] == ["fioprobe", "fioprobe-etcd"]
    assert sorted(set(parts["kinds"])) == [
        "ConfigMap", "DaemonSet", "NetworkPolicy", "Service", "ServiceAccount", "StatefulSet",
    ]  # fmt: skip
    example = (MANIFESTS / "kube-prometheus" / "example.jsonnet").read_text()
    assert "fioprobe.continuous[group][key]" in example
    assert "fioprobe.continuous.namespaces" in example


# --- the DaemonSet's command, run for real ---------------------------------------------------


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        text: str = response.read().decode()
        return text


def _value(text: str, metric: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(metric + "{") and not line.startswith(metric + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def _runs_python_as(user: int) -> bool:
    """Whether `user` can start this Python from a process of its own, as the stream does
    for each writer. Not where the virtualenv's interpreter lives in root's private home
    (setpriv's own exec still gets there, a second one does not): then the command runs as
    root. In the image the interpreter is readable by everyone."""
    assert shutil.which("setpriv"), "setpriv (util-linux) is missing"
    nested = (
        "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', '']).returncode)"
    )
    try:
        proc = subprocess.run(
            ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
             sys.executable, "-c", nested],
            capture_output=True, timeout=60, cwd="/",
        )  # fmt: skip
    except OSError:
        return False
    return proc.returncode == 0


@pytest.mark.slow
def test_etcd_stream_command_runs_and_serves_metrics() -> None:
    """Run exactly the DaemonSet's command, env and mounted config, as its non-root user where
    this machine allows (see _runs_python_as), and scrape it. Substituted, and nothing else:
    every mountPath becomes a local directory (in the arguments and the config's
    `directory`); `--listen` gets a free port on 127.0.0.1 (the pod's port may be taken
    here); NODE_NAME is set to an etcd node, as the scheduler would."""
    pod = Path(tempfile.mkdtemp(prefix="fioprobe-stream-"))
    try:
        _run_daemonset_locally(pod)
    finally:
        shutil.rmtree(pod, ignore_errors=True)


def _run_daemonset_locally(pod: Path) -> None:
    objects = load_objects()
    (daemonset,) = streams_of_kind(objects, "DaemonSet")
    spec = pod_spec(daemonset)
    assert spec is not None
    (container,) = spec["containers"]
    found = stream_config(objects, daemonset)
    paths = {}
    for mount in container["volumeMounts"]:
        (local := pod / mount["name"]).mkdir(parents=True)
        paths[mount["mountPath"]] = local

    def localize(path: str) -> str:
        for mount_path, local in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            if path == mount_path or path.startswith(mount_path + "/"):
                return str(local) + path[len(mount_path) :]
        return path

    config = yaml.safe_load(found["text"])
    for target in config["targets"]:
        target["directory"] = localize(target["directory"])
        target["etcd_data_dir"] = localize(target["etcd_data_dir"])
    (paths["/etc/fioprobe"] / "config.yaml").write_text(yaml.safe_dump(config))
    # A node with the role, as the scheduler would pick.
    node = "control-plane-test-0"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(pod / "home"),
    }
    for item in container["env"]:
        assert item.get("valueFrom") == {"fieldRef": {"fieldPath": "spec.nodeName"}}, item
        env[item["name"]] = node
    port = services.free_port()
    command = [localize(arg) for arg in container["command"]]
    listen = command.index("--listen") + 1
    assert command[listen] == ":9436"
    command[listen] = f"127.0.0.1:{port}"
    runner: list[str] = []
    user = spec["securityContext"]["runAsUser"]
    if os.geteuid() == 0 and _runs_python_as(user):
        # The documented preparation of the etcd directory: owned by the pod's user.
        runner = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
        pod.chmod(0o755)
        os.chown(paths["/probe"], user, user)
    process = subprocess.Popen(
        runner + command, env=env, cwd=paths["/tmp"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 30
        operations = None
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1].decode()[-3000:]
            try:
                text = _scrape(url)
            except OSError:
                text = ""
            operations = _value(
                text, "fioprobe_continuous_operations_total", storageclass="etcd-disk", node=node
            )
            if operations and operations >= 2:
                break
            time.sleep(0.2)
        assert operations and operations >= 2, text[-3000:]
        info = [line for line in text.splitlines() if line.startswith("fioprobe_continuous_info{")]
        assert info and 'etcd_disk="true"' in info[0] and f'ran_on_node="{node}"' in info[0]
        # It wrote only in its own subdirectory of the probe directory.
        assert [p.name for p in paths["/probe"].iterdir()] == [".fioprobe-continuous"]
        # SIGTERM: exit 0 within the pod's grace period (the stream promises 2 s; the
        # kubelet's SIGKILL would leave the file behind), with the file removed.
        process.send_signal(signal.SIGTERM)
        returncode = process.wait(timeout=spec["terminationGracePeriodSeconds"])
        assert returncode == 0, process.communicate()[1].decode()[-3000:]
        assert not list(paths["/probe"].rglob("wal-*"))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
