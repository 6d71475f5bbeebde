"""The Kubernetes manifests: regeneration, the probes' generated configuration, restricted
pod security, the NetworkPolicies, and the CronJob entrypoint run for real.

Server-side validation by a real kube-apiserver is in test_manifests_apiserver.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from fioprobe.probe.prober import PUBLISH_ON_VOLUME_SECONDS
from fioprobe.probe.volume_run import VOLUME_MARGIN_SECONDS
from fioprobe.target.config import load_config
from support import services
from support.manifests import (
    GENERATE,
    GENERATED,
    MANIFESTS,
    NOT_OBJECTS,
    load_objects,
    pod_spec,
    render,
)

#: Pod Security Standard "restricted" (plus what this project adds: no service account token).
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def of_kind(kind: str, directory: Path = GENERATED) -> dict[str, dict[str, Any]]:
    return {name: o for name, o in load_objects(directory).items() if o["kind"] == kind}


# --- generation ---------------------------------------------------------------------------


def test_regenerating_changes_nothing(tmp_path: Path) -> None:
    out = render(tmp_path)
    fresh = sorted(p.name for p in out.glob("*.yaml"))
    committed = sorted(p.name for p in GENERATED.glob("*.yaml"))
    assert fresh == committed, "run `make generate` and commit manifests/"
    for name in fresh:
        assert (out / name).read_text() == (GENERATED / name).read_text(), name
    assert (tmp_path / "kustomization.yaml").read_text() == (
        MANIFESTS / "kustomization.yaml"
    ).read_text()


def test_kustomization_lists_every_generated_object_once() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    files = {p.name for p in GENERATED.glob("*.yaml")}
    assert files >= NOT_OBJECTS
    assert sorted(resources) == sorted(f"generated/{name}" for name in files - NOT_OBJECTS)
    # What is left out is no Kubernetes object (kubectl could not apply it).
    for name in NOT_OBJECTS:
        document = yaml.safe_load((GENERATED / name).read_text())
        assert "kind" not in document and "apiVersion" not in document, name


def test_every_probe_configmap_is_a_valid_fioprobe_config(tmp_path: Path) -> None:
    """The ConfigMaps hold fioprobe's strict YAML config: load each with the real loader."""
    configmaps = [
        o for o in of_kind("ConfigMap").values() if o["metadata"]["name"] == "fioprobe-config"
    ]
    assert len(configmaps) == 2  # StorageClass probes, etcd probes
    loaded = 0
    for cm in configmaps:
        for key, text in cm["data"].items():
            path = tmp_path / key
            path.write_text(text)
            config = load_config(path)
            assert [t.name for t in config.targets] == [key.removesuffix(".yaml")]
            loaded += 1
    assert loaded == 3  # gp2, gp3, etcd-disk


def test_pvc_size_is_the_volume_model_size() -> None:
    """gp2's baseline depends on the size: the PVC and the model come from one value."""
    pvcs = {
        o["metadata"]["labels"].get("app.kubernetes.io/instance"): o
        for o in of_kind("PersistentVolumeClaim").values()
    }
    (cm,) = [
        o
        for o in of_kind("ConfigMap").values()
        if o["metadata"]["name"] == "fioprobe-config" and o["metadata"]["namespace"] == "fioprobe"
    ]
    for key, text in cm["data"].items():
        target = yaml.safe_load(text)["targets"][0]
        pvc = pvcs[target["name"]]
        assert pvc["spec"]["resources"]["requests"]["storage"] == target["volume"]["size"]
        assert pvc["spec"]["storageClassName"] == target["name"], key


def test_odf_example_probes_the_ceph_rbd_storageclass_on_openshift(tmp_path: Path) -> None:
    """manifests/examples/odf.libsonnet, as its comment says to use it: a PVC of ODF's RBD
    StorageClass, probed with the ceph-rbd volume model, under OpenShift's SCC."""
    overrides = (MANIFESTS / "examples" / "odf.libsonnet").read_text()
    subprocess.run(
        ["bash", str(GENERATE), str(tmp_path), "--tla-code", f"overrides={overrides}"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    out = tmp_path / "generated"
    claims = {
        o["spec"].get("storageClassName") for o in of_kind("PersistentVolumeClaim", out).values()
    }
    assert "ocs-storagecluster-ceph-rbd" in claims
    (cm,) = [
        o for o in of_kind("ConfigMap", out).values()
        if o["metadata"]["name"] == "fioprobe-config" and o["metadata"]["namespace"] == "fioprobe"
    ]  # fmt: skip
    (text,) = cm["data"].values()
    path = tmp_path / "odf.yaml"
    path.write_text(text)
    (target,) = load_config(path).targets
    assert target.volume.type == "ceph-rbd"
    assert target.volume.provisioner == "openshift-storage.rbd.csi.ceph.com"
    assert of_kind("SecurityContextConstraints", out)


def test_kube_prometheus_part_leaves_rules_and_dashboards_to_add_mixin() -> None:
    """In kube-prometheus, addMixin makes the PrometheusRule and dashboards: not fioprobe."""
    rendered = subprocess.run(
        [str(REPO / ".tools" / "bin" / "go-jsonnet"), "-J", str(REPO), "-e",
         "(import 'manifests/kube-prometheus/fioprobe.libsonnet')()"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    parts = json.loads(rendered.stdout)
    assert parts["monitoring"]["prometheusRule"] is None
    assert parts["monitoring"]["dashboards"] == {}
    assert parts["pushgateway"]["serviceMonitor"]["spec"]["endpoints"][0]["honorLabels"] is True
    ingress = parts["pushgateway"]["networkPolicy"]["spec"]["ingress"][0]["from"]
    assert {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    } in ingress
    example = (MANIFESTS / "kube-prometheus" / "example.jsonnet").read_text()
    assert "import 'kube-prometheus/lib/mixin.libsonnet'" in example
    assert "import 'fioprobe/mixin.libsonnet'" in example


# --- restricted pod security and network policy ----------------------------------------------


def test_every_pod_spec_is_restricted() -> None:
    workloads = {n: o for n, o in load_objects().items() if pod_spec(o) is not None}
    # Pushgateway, 2 StorageClass CronJobs, the etcd probes' DaemonSet; the continuous stream:
    # a DaemonSet on the etcd nodes and a StatefulSet per StorageClass; the provisioning probe's
    # CronJob.
    assert len(workloads) == 8
    for name, obj in workloads.items():
        spec = pod_spec(obj)
        assert spec is not None
        # No pod mounts the token by itself; where the API is read (the etcd probes, to list
        # the members by role; the provisioning probe), a projected token in the probe's
        # container alone.
        assert spec["automountServiceAccountToken"] is False, name
        reads_api = (obj["kind"], obj["metadata"]["name"]) in {
            ("DaemonSet", "fioprobe-etcd"),
            ("CronJob", "fioprobe-provision"),
        }
        token = [v for v in spec["volumes"] if v["name"] == "kube-api-access"]
        assert bool(token) is reads_api, name
        for container in spec["containers"] + spec.get("initContainers", []):
            mounts = {m["name"]: m for m in container["volumeMounts"]}
            if container["name"] == "fioprobe" and reads_api:
                assert mounts["kube-api-access"] == {
                    "name": "kube-api-access",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": True,
                }
            else:
                assert "kube-api-access" not in mounts, (name, container["name"])
        assert spec.get("hostNetwork", False) is False, name
        assert spec.get("hostPID", False) is False and spec.get("hostIPC", False) is False
        pod_sc = spec["securityContext"]
        assert pod_sc["runAsNonRoot"] is True, name
        assert pod_sc["runAsUser"] > 0, name
        assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in spec["containers"]:
            sc = container["securityContext"]
            for key, want in RESTRICTED_CONTAINER.items():
                assert sc.get(key) == want, f"{name}: {container['name']}: {key}"
            assert "add" not in sc["capabilities"], name
            assert "privileged" not in sc or sc["privileged"] is False, name
            resources = container["resources"]
            assert resources["requests"] and resources["limits"]["memory"], name
        # The one exception: the etcd pods' prepare step, root with two capabilities and no
        # more, on exactly the pod's DirectoryOrCreate volumes.
        created = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]
                   if v.get("hostPath", {}).get("type") == "DirectoryOrCreate"}  # fmt: skip
        for container in spec.get("initContainers", []):
            assert container["name"] == "prepare", name
            sc = container["securityContext"]
            assert sc["runAsUser"] == 0 and sc["runAsNonRoot"] is False, name
            assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}, name
            assert sc["readOnlyRootFilesystem"] is True, name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, name
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert set(mounts.values()) == set(created), name
            assert container["command"][:4] == ["fioprobe", "prepare-dirs", "--owner", "65532"]
            paths = container["command"][5::2]
            assert sorted(paths) == sorted(f"{mount}={created[volume]}"
                                           for mount, volume in mounts.items()), name  # fmt: skip
        assert bool(spec.get("initContainers")) == bool(created), name
        # The only hostPaths allowed: the etcd probes' dedicated directory (the probes and the
        # stream on the same nodes), the node's state directory for the probes (their state
        # never lives where fio writes), both created by the prepare step, and etcd's data
        # directory, read-only, never created.
        for volume in spec["volumes"]:
            if "hostPath" in volume:
                assert obj["metadata"]["namespace"] == "fioprobe-etcd", name
                assert (obj["kind"], obj["metadata"]["name"]) in {
                    ("DaemonSet", "fioprobe-etcd"),
                    ("DaemonSet", "fioprobe-continuous"),
                }, name
                allowed = {
                    "probe": ("/var/lib/etcd-fioprobe", "DirectoryOrCreate"),
                    "state": ("/var/lib/fioprobe/state", "DirectoryOrCreate"),
                    "etcd-data": ("/var/lib/etcd", "Directory"),
                }
                if obj["metadata"]["name"] != "fioprobe-etcd":
                    allowed.pop("state")
                path, kind = allowed[volume["name"]]
                assert volume["hostPath"] == {"path": path, "type": kind}, name
        for container in spec["containers"]:
            for mount in container["volumeMounts"]:
                if mount["name"] == "etcd-data":
                    assert mount.get("readOnly") is True, name
    for sa in of_kind("ServiceAccount").values():
        assert sa["automountServiceAccountToken"] is False


def test_the_etcd_probes_read_only_the_node_names_of_the_api() -> None:
    """Its ClusterRole may get and list Nodes, nothing else, bound to its own ServiceAccount;
    its NetworkPolicy adds the API server's ports. (The provisioning probe's RBAC is
    tests/deploy/test_manifests_provisioning.py's.)"""
    (role,) = [r for r in of_kind("ClusterRole").values()
               if r["metadata"]["name"] != "fioprobe-provision"]  # fmt: skip
    assert role["metadata"]["name"] == "fioprobe-etcd-members"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    (binding,) = [b for b in of_kind("ClusterRoleBinding").values()
                  if b["metadata"]["name"] != "fioprobe-provision"]  # fmt: skip
    assert binding["roleRef"]["name"] == "fioprobe-etcd-members"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fioprobe-etcd", "namespace": "fioprobe-etcd"}
    ]
    (daemonset,) = [d for d in of_kind("DaemonSet").values()
                    if d["metadata"]["name"] == "fioprobe-etcd"]  # fmt: skip
    spec = daemonset["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "fioprobe-etcd"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
            ]
        },
        {"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]},
    ]
    (container,) = spec["containers"]
    assert container["command"] == [
        "fioprobe", "run", "--config", "/etc/fioprobe/config.yaml", "--every", "300",
        "--members-label", "node-role.kubernetes.io/control-plane",
        "--members-label", "node-role.kubernetes.io/master",
    ]  # fmt: skip
    config = _config_of(daemonset)
    (target,) = config["targets"]
    assert target["etcd_disk"] is True and target["etcd_data_dir"] == "/etcd-data"
    assert target["state_dir"] == "/var/lib/fioprobe-state/etcd-disk"
    keys = {t["key"] for t in spec["tolerations"]}
    assert "node-role.kubernetes.io/control-plane" in keys


def _config_of(cronjob: dict[str, Any]) -> dict[str, Any]:
    """The fioprobe configuration a CronJob mounts (its ConfigMap's one item)."""
    spec = pod_spec(cronjob)
    assert spec is not None
    (volume,) = [v["configMap"] for v in spec["volumes"] if "configMap" in v]
    configmaps = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in of_kind("ConfigMap").values()
    }
    (item,) = volume["items"]
    text = configmaps[(cronjob["metadata"]["namespace"], volume["name"])]["data"][item["key"]]
    config: dict[str, Any] = yaml.safe_load(text)
    return config


def test_cronjobs_are_bounded_and_spread() -> None:
    """The StorageClass probes' CronJobs (the provisioning probe's is
    tests/deploy/test_manifests_provisioning.py's)."""
    cronjobs = {name: cj for name, cj in of_kind("CronJob").items()
                if cj["metadata"]["labels"]["app.kubernetes.io/component"] == "probe"}  # fmt: skip
    assert len(cronjobs) == 2
    schedules = []
    for name, cj in cronjobs.items():
        spec = cj["spec"]
        assert spec["concurrencyPolicy"] == "Forbid", name
        assert 0 < spec["startingDeadlineSeconds"] < 300, name  # below the 5-minute interval
        assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
        job = spec["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 0, name
        # Every profile may run to its deadline and publish on its volume, every push take
        # all its attempts (the prober's limits, the manifests' defaults: 60 s profiles,
        # 3 x 10 s).
        profiles = len(_config_of(cj)["targets"][0]["profiles"])
        worst = VOLUME_MARGIN_SECONDS + PUBLISH_ON_VOLUME_SECONDS + 60 + 2 * 3 * 10
        assert job["activeDeadlineSeconds"] >= profiles * worst + 60, name
        container = job["template"]["spec"]["containers"][0]
        assert container["command"] == ["fioprobe", "run", "--config", "/etc/fioprobe/config.yaml"]
        env = {e["name"]: e for e in container["env"]}
        assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        schedules.append((cj["metadata"]["namespace"], spec["schedule"]))
    # Jitter: the StorageClass probes start at different minutes of the interval.
    assert len(set(schedules)) == len(schedules), schedules


def test_probe_network_policy_allows_only_the_pushgateway_and_dns() -> None:
    policies = {
        o["metadata"]["namespace"]: o
        for o in of_kind("NetworkPolicy").values()
        if o["metadata"]["name"] == "fioprobe-probes"
    }
    assert set(policies) == {"fioprobe", "fioprobe-etcd"}
    (deployment,) = of_kind("Deployment").values()
    pushgateway_labels = deployment["spec"]["template"]["metadata"]["labels"]
    port = deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    for namespace, policy in policies.items():
        spec = policy["spec"]
        assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
        assert spec["ingress"] == []
        # Selects every probe pod of its namespace (and no Pushgateway).
        selector = spec["podSelector"]["matchLabels"]
        for workload in [*of_kind("CronJob").values(), *of_kind("DaemonSet").values()]:
            if workload["metadata"]["namespace"] == namespace:
                template = workload["spec"].get("jobTemplate", workload)["spec"]["template"]
                if template["metadata"]["labels"]["app.kubernetes.io/component"] == "probe":
                    assert selector.items() <= template["metadata"]["labels"].items()
        assert not selector.items() <= pushgateway_labels.items()
        dns = [r for r in spec["egress"] if {p["port"] for p in r["ports"]} == {53}]
        # The etcd probes read the member list from the API server: its ports, any address
        # (apiServer.cidrs empty), nothing else.
        api = [r for r in spec["egress"] if {p["port"] for p in r["ports"]} == {443, 6443}]
        assert len(api) == (namespace == "fioprobe-etcd"), namespace
        for rule in api:
            assert "to" not in rule and {p["protocol"] for p in rule["ports"]} == {"TCP"}
        others = [r for r in spec["egress"] if r not in dns and r not in api]
        # DNS: port 53 only, to the cluster DNS pods only (to resolve the Pushgateway name).
        assert len(dns) == 1
        assert {p["protocol"] for p in dns[0]["ports"]} == {"UDP", "TCP"}
        (peer,) = dns[0]["to"]
        assert peer["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
        assert peer["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "kube-system"
        }
        # The single other egress: the Pushgateway pods, on its port.
        assert len(others) == 1
        (rule,) = others
        assert rule["ports"] == [{"protocol": "TCP", "port": port}]
        (peer,) = rule["to"]
        assert peer["namespaceSelector"]["matchLabels"] == {
            "kubernetes.io/metadata.name": "fioprobe"
        }
        assert peer["podSelector"]["matchLabels"].items() <= pushgateway_labels.items()
        assert "ipBlock" not in peer


def test_pushgateway_persists_on_its_pvc_and_is_scraped_with_honor_labels() -> None:
    (deployment,) = of_kind("Deployment").values()
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    persistence = [a for a in container["args"] if a.startswith("--persistence.file=")]
    assert persistence == [f"--persistence.file={mounts['data']}/pushgateway.db"]
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert claim in {o["metadata"]["name"] for o in of_kind("PersistentVolumeClaim").values()}
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    (monitor,) = of_kind("ServiceMonitor").values()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["honorLabels"] is True
    # It selects the Pushgateway's Service and no other (the streams' headless one).
    selector = monitor["spec"]["selector"]["matchLabels"].items()
    (service,) = [
        s for s in of_kind("Service").values() if selector <= s["metadata"]["labels"].items()
    ]
    assert service["metadata"]["name"] == deployment["metadata"]["name"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_prometheus_rule_and_dashboards_come_from_the_mixin() -> None:
    rules = {r["metadata"]["name"]: r for r in of_kind("PrometheusRule").values()}
    assert sorted(rules) == ["fioprobe", "fioprobe-expected"]
    rendered = subprocess.run(
        [
            str(REPO / ".tools" / "bin" / "go-jsonnet"),
            "-J",
            str(REPO),
            str(REPO / "alerts" / "rules.jsonnet"),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    # The mixin's own groups in one, the deployment's facts (fioprobe.expected) in the other.
    mixin_groups = json.loads(rendered.stdout)["groups"]
    assert rules["fioprobe"]["spec"]["groups"] == mixin_groups
    assert [g["name"] for g in rules["fioprobe-expected"]["spec"]["groups"]] == [
        "fioprobe.expected"
    ]
    dashboards = {
        key: cm
        for cm in of_kind("ConfigMap").values()
        if cm["metadata"]["labels"].get("grafana_dashboard") == "1"
        for key in cm["data"]
    }
    committed = sorted(p.name for p in (REPO / "dashboards" / "out").glob("*.json"))
    assert sorted(dashboards) == committed
    for key, cm in dashboards.items():
        assert json.loads(cm["data"][key]) == json.loads(
            (REPO / "dashboards" / "out" / key).read_text()
        )


def test_pushgateway_auth_and_tls_switches_wire_files_not_values(tmp_path: Path) -> None:
    """Off by default; when on, the probes get file paths into mounted Secrets."""
    for obj in load_objects().values():
        assert obj["kind"] != "Secret"
    out = render(tmp_path, "{ pushgateway: { auth: { enabled: true }, tls: { enabled: true } } }")
    objects = load_objects(out)
    (cm,) = [
        o
        for o in objects.values()
        if o["kind"] == "ConfigMap" and o["metadata"].get("namespace") == "fioprobe"
        and o["metadata"]["name"] == "fioprobe-config"
    ]  # fmt: skip
    gp2 = yaml.safe_load(cm["data"]["gp2.yaml"])["pushgateway"]
    assert gp2["url"].startswith("https://")
    cronjob = next(o for o in objects.values() if o["kind"] == "CronJob")
    spec = pod_spec(cronjob)
    assert spec is not None
    mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    assert secrets == {
        "pushgateway-auth": "fioprobe-pushgateway-auth",
        "pushgateway-ca": "fioprobe-pushgateway-ca",
    }
    assert gp2["username_file"] == mounts["pushgateway-auth"] + "/username"
    assert gp2["password_file"] == mounts["pushgateway-auth"] + "/password"
    assert gp2["ca_file"] == mounts["pushgateway-ca"] + "/ca.crt"
    deployment = next(o for o in objects.values() if o["kind"] == "Deployment")
    args = pod_spec(deployment)["containers"][0]["args"]  # type: ignore[index]
    assert "--web.config.file=/etc/pushgateway/web-config.yml" in args
    monitor = next(o for o in objects.values() if o["kind"] == "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and "basicAuth" in endpoint and "tlsConfig" in endpoint


# --- the CronJob entrypoint, run for real ---------------------------------------------------


def _local_command(cronjob: dict[str, Any], root: Path, pushgateway_url: str):
    """The CronJob's container command, env and mounted ConfigMap, made runnable here.

    Substituted, and nothing else: (1) every volume mountPath becomes a directory under
    `root` (a pod's mounts do not exist on this machine), in the command's arguments and in
    the config's paths; (2) the config's pushgateway.url becomes the local
    Pushgateway's (the Service name does not resolve here); (3) env from the downward API
    (spec.nodeName) is set to what the scheduler would give: the node the CronJob is pinned
    to, or a stand-in node name. Command, arguments, every other env and config key are
    used as they are.
    """
    spec = pod_spec(cronjob)
    assert spec is not None
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    paths = {}
    for mount in container["volumeMounts"]:
        local = root / mount["name"]
        local.mkdir(parents=True)
        paths[mount["mountPath"]] = local

    def localize(path: str) -> str:
        for mount_path, local in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            if path == mount_path or path.startswith(mount_path + "/"):
                return str(local) + path[len(mount_path) :]
        return path

    configmaps = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in of_kind("ConfigMap").values()
    }
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" not in volume:
            continue
        cm = configmaps[(cronjob["metadata"]["namespace"], volume["configMap"]["name"])]
        for item in volume["configMap"]["items"]:
            config = yaml.safe_load(cm["data"][item["key"]])
            config["pushgateway"]["url"] = pushgateway_url
            for target in config["targets"]:
                target["directory"] = localize(target["directory"])
                for key in ("state_dir", "etcd_data_dir"):
                    if key in target:
                        target[key] = localize(target[key])
            (paths[mount["mountPath"]] / item["path"]).write_text(yaml.safe_dump(config))

    node = spec.get("nodeSelector", {}).get("kubernetes.io/hostname", "control-plane-test-0")
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(root / "home"),
    }
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item.get("valueFrom") == {"fieldRef": {"fieldPath": "spec.nodeName"}}:
            env[item["name"]] = node
        else:
            raise AssertionError(f"env {item['name']}: unknown source; teach this test")
    command = [localize(arg) for arg in container["command"] + container.get("args", [])]
    # A DaemonSet's schedule (`--every` and the members it takes turns with) is left out: one
    # pass is what each of its slots runs (the stagger has tests of its own).
    if "--every" in command:
        command = command[: command.index("--every")]
    return command, env, paths, node


def _pushed(pushgateway_url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(pushgateway_url + "/api/v1/metrics", timeout=10) as response:
        return json.load(response)["data"]


@pytest.mark.slow
@pytest.mark.parametrize("file", ["storageclasses-cronjob-gp2.yaml", "etcd-daemonset.yaml"])
def test_cronjob_entrypoint_pushes_metrics(file: str, pushgateway: services.Service) -> None:
    """Run exactly the probe container's command (one pass), as its non-root user, against a
    real Pushgateway; the etcd probe's data directory is on its probe directory's
    filesystem, as on a node where the check passes."""
    # Not under pytest's tmp_path: its parent is private to root, and the probe runs as the
    # pod's non-root user, who must reach its "mounts".
    pod = Path(tempfile.mkdtemp(prefix="fioprobe-pod-"))
    try:
        _run_cronjob_locally(file, pod, pushgateway)
    finally:
        shutil.rmtree(pod, ignore_errors=True)


def _run_cronjob_locally(file: str, pod: Path, pushgateway: services.Service) -> None:
    cronjob = yaml.safe_load((GENERATED / file).read_text())
    command, env, paths, node = _local_command(cronjob, pod, pushgateway.url)
    spec = pod_spec(cronjob)
    assert spec is not None
    user = spec["securityContext"]["runAsUser"]
    runner: list[str] = []
    if os.geteuid() == 0:
        # As the pod's runAsUser. fsGroup (PVC) or the documented preparation (hostPath)
        # make the probe volume the user's; the config mount stays root's and read-only.
        assert shutil.which("setpriv"), "setpriv (util-linux) is missing"
        runner = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
        pod.chmod(0o755)
        for mount, local in paths.items():
            if mount != "/etc/fioprobe":
                os.chown(local, user, user)
    result = subprocess.run(
        runner + command, env=env, capture_output=True, timeout=300, cwd=paths["/tmp"]
    )
    assert result.returncode == 0, result.stderr.decode()[-3000:]

    config = yaml.safe_load((paths["/etc/fioprobe"] / "config.yaml").read_text())
    (target,) = config["targets"]
    profiles = [p if isinstance(p, str) else p["name"] for p in target["profiles"]]
    groups = {}
    for group in _pushed(pushgateway.url):
        labels = group["labels"]
        groups[(labels["storageclass"], labels["profile"], labels.get("node"))] = group
    want_node = node if target["node_local"] else None
    for profile in profiles:
        group = groups.get((target["name"], profile, want_node))
        assert group is not None, f"no group for {target['name']}/{profile}: {sorted(groups)}"
        success = group["fioprobe_success"]["metrics"][0]["value"]
        assert float(success) == 1.0, profile
        info = group["fioprobe_info"]["metrics"][0]["labels"]
        assert info["ran_on_node"] == node
    # State lives on the probe's own PVC (dedicated), or on the node's state directory for
    # the hostPath of a node-local probe, which tenants may write (docs/SAFETY.md).
    if "state_dir" in target:
        assert not (paths["/probe"] / ".fioprobe-state").exists()
        assert list(Path(target["state_dir"]).glob("*.json"))
    else:
        assert target["volume"]["dedicated"] is True
        assert list((paths["/probe"] / ".fioprobe-state").glob("*.json"))


def test_the_pushgateway_admits_every_probe_pod() -> None:
    """Every pod that pushes (the CronJobs' and the etcd probes' DaemonSet's) matches a peer of
    the Pushgateway's ingress: its namespace by name and its labels."""
    (policy,) = [o for o in of_kind("NetworkPolicy").values()
                 if o["metadata"]["name"] == "fioprobe-pushgateway"]  # fmt: skip
    (rule,) = policy["spec"]["ingress"]
    pushers = [
        o
        for o in load_objects().values()
        if pod_spec(o) is not None
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == "probe"
    ]
    assert {o["kind"] for o in pushers} == {"CronJob", "DaemonSet"}
    for obj in pushers:
        template = obj["spec"].get("jobTemplate", obj)["spec"]["template"]
        labels = template["metadata"]["labels"]
        namespace = obj["metadata"]["namespace"]
        assert any(
            peer.get("namespaceSelector", {}).get("matchLabels")
            == {"kubernetes.io/metadata.name": namespace}
            and peer["podSelector"]["matchLabels"].items() <= labels.items()
            for peer in rule["from"]
        ), (obj["kind"], obj["metadata"]["name"])
