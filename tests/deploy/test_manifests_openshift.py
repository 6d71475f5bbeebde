"""The manifests on OpenShift (`platform: 'openshift'`), tested as far as a machine without an
OpenShift cluster allows.

- Every pod but the hostPath probes pins no user, group or fsGroup (OpenShift's restricted-v2
  assigns them from the namespace's range and refuses others), names restricted-v2 as its
  required SCC, and is accepted by a real kube-apiserver in the `fioprobe` namespace, which
  enforces Pod Security `restricted`: the closest admission to restricted-v2 here (SCC
  admission itself runs only in OpenShift's API server). With the default platform the same
  pods are checked by tests/deploy/test_manifests_apiserver.py.
- SCC admission is modelled field by field (`scc_problems`, from OpenShift's documentation of
  the fields): restricted-v2 (as OpenShift ships it) admits every pod but the hostPath probes,
  and refuses the pods of platform `kubernetes`, which pin 65532; the SCC
  `fioprobe-hostpath` admits exactly the hostPath probes and refuses a pod asking for more.
- The SCC's fields are those documented for security.openshift.io/v1, and the API server
  accepts it (strict field validation) under the SCC CustomResourceDefinition of
  github.com/openshift/api at a pinned commit, which the setup downloads from the Go module
  proxy and checks by its hash (scripts/setup.d/32-openshift-crd.sh).
- The ClusterRole and RoleBindings are applied for real, and `kubectl auth can-i use` says
  that exactly the hostPath probes' ServiceAccounts may use the SCC, each in its own
  namespace.
"""

from __future__ import annotations

import copy
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from support import kubeapi
from support.kubeapi import Kube

GENERATE = REPO / "scripts" / "generate.d" / "30-manifests.sh"
PROBE_USER = 65532

#: A kube-apiserver and etcd of this module's own, ready for the generated manifests.
kube = kubeapi.kube

#: OpenShift with every kind of pod: the etcd probes and stream, per-node probes with a local
#: disk and an ephemeral volume, the StorageClass probes and streams, and the Pushgateway with
#: its Secrets (without the mixin's rules and dashboards: no pods, and most of the rendering
#: time).
OVERRIDES = """{
  platform: 'openshift',
  monitoring: { prometheusRule: { enabled: false }, dashboards: { enabled: false } },
  pushgateway: { auth: { enabled: true }, tls: { enabled: true } },
  perNode: {
    enabled: true,
    localDisks: [{ name: 'node-disk', profiles: ['etcd-fsync'] }],
    storageClasses: [{ name: 'gp3-node', storageClassName: 'gp3', volume: { size: '1Gi' },
                       profiles: ['etcd-fsync'] }],
  },
}"""

#: The objects of the hostPath probes, by kind and name: the only pods that pin IDs there.
HOST_PATH_WORKLOADS = {
    ("DaemonSet", "fioprobe-etcd"),
    ("DaemonSet", "fioprobe-continuous"),
    ("DaemonSet", "fioprobe-node"),
}
SCC_NAME = "fioprobe-hostpath"
USE_SCC = ("use", f"securitycontextconstraints.security.openshift.io/{SCC_NAME}")

#: The SCC's fields, as "SecurityContextConstraints [security.openshift.io/v1]" of OpenShift's
#: API reference (docs.redhat.com, openshift_container_platform/latest, security_apis) lists
#: them, and the fields it requires.
DOC_FIELDS = {
    "apiVersion", "kind", "metadata", "allowHostDirVolumePlugin", "allowHostIPC",
    "allowHostNetwork", "allowHostPID", "allowHostPorts", "allowPrivilegeEscalation",
    "allowPrivilegedContainer", "allowedCapabilities", "allowedFlexVolumes",
    "allowedUnsafeSysctls", "defaultAddCapabilities", "defaultAllowPrivilegeEscalation",
    "forbiddenSysctls", "fsGroup", "groups", "priority", "readOnlyRootFilesystem",
    "requiredDropCapabilities", "runAsUser", "seLinuxContext", "seccompProfiles",
    "supplementalGroups", "userNamespaceLevel", "users", "volumes",
}  # fmt: skip
DOC_REQUIRED = {
    "allowHostDirVolumePlugin", "allowHostIPC", "allowHostNetwork", "allowHostPID",
    "allowHostPorts", "allowPrivilegedContainer", "readOnlyRootFilesystem",
}  # fmt: skip
#: Strategy types (github.com/openshift/api security/v1 types.go; "Managing security context
#: constraints" of OpenShift's documentation describes each).
STRATEGIES = {
    "runAsUser": {"MustRunAs", "MustRunAsRange", "MustRunAsNonRoot", "RunAsAny"},
    "seLinuxContext": {"MustRunAs", "RunAsAny"},
    "fsGroup": {"MustRunAs", "RunAsAny"},
    "supplementalGroups": {"MustRunAs", "RunAsAny"},
}

#: restricted-v2 as OpenShift 4 ships it (cluster-kube-apiserver-operator's
#: bindata/bootkube/scc-manifests/0000_20_kube-apiserver-operator_00_scc-restricted-v2.yaml),
#: with the ranges a namespace's annotations would give it (openshift.io/sa.scc.uid-range,
#: openshift.io/sa.scc.supplemental-groups) filled in.
NAMESPACE_RANGE = {"min": 1000680000, "max": 1000689999}
RESTRICTED_V2: dict[str, Any] = {
    "allowHostDirVolumePlugin": False,
    "allowHostIPC": False,
    "allowHostNetwork": False,
    "allowHostPID": False,
    "allowHostPorts": False,
    "allowPrivilegeEscalation": False,
    "allowPrivilegedContainer": False,
    "allowedCapabilities": ["NET_BIND_SERVICE"],
    "readOnlyRootFilesystem": False,
    "requiredDropCapabilities": ["ALL"],
    "runAsUser": {"type": "MustRunAsRange", "uidRangeMin": NAMESPACE_RANGE["min"],
                  "uidRangeMax": NAMESPACE_RANGE["max"]},
    "fsGroup": {"type": "MustRunAs", "ranges": [NAMESPACE_RANGE]},
    "supplementalGroups": {"type": "RunAsAny"},
    "seLinuxContext": {"type": "MustRunAs"},
    "seccompProfiles": ["runtime/default"],
    "volumes": ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                "persistentVolumeClaim", "projected", "secret"],
}  # fmt: skip

#: The SecurityContextConstraints CRD of OpenShift's API module at a pinned commit, installed
#: by the setup (scripts/setup.d/32-openshift-crd.sh, which checks the module's hash): a test
#: reaches no registry.
SCC_CRD = REPO / ".tools" / "kube-openshift" / "scc.crd.yaml"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("openshift")
    subprocess.run(
        ["bash", str(GENERATE), str(out), "--tla-code", f"overrides={OVERRIDES}"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


def load(out: Path) -> dict[str, dict[str, Any]]:
    """{file name: object} of what the kustomization applies."""
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    return {Path(r).name: yaml.safe_load((out / r).read_text()) for r in kustomization["resources"]}


def pod_template(o: dict[str, Any]) -> dict[str, Any] | None:
    if o["kind"] == "CronJob":
        template: dict[str, Any] = o["spec"]["jobTemplate"]["spec"]["template"]
        return template
    if o["kind"] in ("DaemonSet", "Deployment", "StatefulSet"):
        template = o["spec"]["template"]
        if o["kind"] == "StatefulSet":  # each claim template is a PVC volume of the pod
            template = copy.deepcopy(template)
            for claim in o["spec"].get("volumeClaimTemplates", []):
                name = claim["metadata"]["name"]
                volume = {"name": name, "persistentVolumeClaim": {"claimName": name}}
                template["spec"].setdefault("volumes", []).append(volume)
        return template
    return None


def workloads(objects: dict[str, dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(object, pod template) of every object with pods."""
    pairs = [(o, pod_template(o)) for o in objects.values()]
    return [(o, t) for o, t in pairs if t is not None]


def volume_type(volume: dict[str, Any]) -> str:
    (kind,) = set(volume) - {"name"}
    return kind


def has_host_path(template: dict[str, Any]) -> bool:
    return any(volume_type(v) == "hostPath" for v in template["spec"].get("volumes", []))


def in_ranges(value: int, ranges: list[dict[str, int]]) -> bool:
    return any(r["min"] <= value <= r["max"] for r in ranges)


def scc_problems(scc: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Why SCC admission would refuse a pod with `spec` under `scc`, as OpenShift's
    documentation of each field describes it (a pod that sets no user or fsGroup gets the
    SCC's default, which its own strategy allows)."""
    problems: list[str] = []
    pod = spec.get("securityContext", {})
    containers = spec.get("initContainers", []) + spec["containers"]

    def user_problem(uid: int | None, where: str) -> None:
        strategy = scc["runAsUser"]
        if uid is None or strategy["type"] == "RunAsAny":
            return
        if strategy["type"] == "MustRunAs" and uid != strategy["uid"]:
            problems.append(f"{where}runAsUser {uid}: not {strategy['uid']}")
        if strategy["type"] == "MustRunAsRange" and not (
            strategy["uidRangeMin"] <= uid <= strategy["uidRangeMax"]
        ):
            problems.append(f"{where}runAsUser {uid}: outside the namespace's range")
        if strategy["type"] == "MustRunAsNonRoot" and uid == 0:
            problems.append(f"{where}runAsUser 0")

    user_problem(pod.get("runAsUser"), "")
    fs_group = pod.get("fsGroup")
    fs_ranges = scc["fsGroup"].get("ranges") if scc["fsGroup"]["type"] == "MustRunAs" else None
    if fs_group is not None and fs_ranges is not None and not in_ranges(fs_group, fs_ranges):
        problems.append(f"fsGroup {fs_group}: not an allowed group")
    if scc["supplementalGroups"]["type"] == "MustRunAs":
        for group in pod.get("supplementalGroups", []):
            if not in_ranges(group, scc["supplementalGroups"]["ranges"]):
                problems.append(f"supplementalGroups {group}: not an allowed group")
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host) and not scc["allow" + host[0].upper() + host[1:]]:
            problems.append(f"{host}: not allowed")
    allowed_volumes = set(scc["volumes"])
    for volume in spec.get("volumes", []):
        kind = volume_type(volume)
        if "*" not in allowed_volumes and kind not in allowed_volumes:
            problems.append(f"volume {volume['name']}: {kind} volumes are not allowed")
        if kind == "hostPath" and not scc["allowHostDirVolumePlugin"]:
            problems.append(f"volume {volume['name']}: host directories are not allowed")
    profiles = scc.get("seccompProfiles") or []
    pod_seccomp = pod.get("seccompProfile", {}).get("type")
    for container in containers:
        where = f"container {container['name']}: "
        own = container.get("securityContext", {})
        user_problem(own.get("runAsUser"), where)
        seccomp = own.get("seccompProfile", {}).get("type", pod_seccomp)
        if (
            profiles
            and "*" not in profiles
            and not (seccomp == "RuntimeDefault" and "runtime/default" in profiles)
        ):
            problems.append(f"{where}seccomp profile {seccomp}: not allowed")
        if own.get("privileged") and not scc["allowPrivilegedContainer"]:
            problems.append(f"{where}privileged: not allowed")
        if scc.get("allowPrivilegeEscalation") is False and own.get(
            "allowPrivilegeEscalation", True
        ):
            problems.append(f"{where}allowPrivilegeEscalation: must be false")
        if scc["readOnlyRootFilesystem"] and not own.get("readOnlyRootFilesystem"):
            problems.append(f"{where}readOnlyRootFilesystem: must be true")
        capabilities = own.get("capabilities", {})
        added = set(capabilities.get("add", []))
        allowed = set(scc.get("allowedCapabilities") or [])
        if added - allowed and "*" not in allowed:
            problems.append(f"{where}capabilities {sorted(added - allowed)}: not allowed")
        dropped = set(capabilities.get("drop", []))
        required = set(scc.get("requiredDropCapabilities") or [])
        if required - dropped and "ALL" not in dropped:
            problems.append(f"{where}capabilities {sorted(required - dropped)}: must be dropped")
        for port in container.get("ports", []):
            if port.get("hostPort") and not scc["allowHostPorts"]:
                problems.append(f"{where}hostPort {port['hostPort']}: not allowed")
    return problems


# --- the rendered objects ----------------------------------------------------------------------


def test_only_the_hostpath_probes_pin_ids(rendered: Path) -> None:
    pinned = {"runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"}
    seen = set()
    for o, template in workloads(load(rendered)):
        spec, security = template["spec"], template["spec"]["securityContext"]
        annotation = template["metadata"].get("annotations", {}).get("openshift.io/required-scc")
        assert security["runAsNonRoot"] is True
        for container in spec["containers"]:
            assert not pinned & set(container["securityContext"]), o["metadata"]["name"]
        if has_host_path(template):
            seen.add((o["kind"], o["metadata"]["name"]))
            ids = {security[key] for key in ("runAsUser", "runAsGroup", "fsGroup")}
            assert ids == {PROBE_USER}, o["metadata"]["name"]
            assert annotation == SCC_NAME
        else:
            assert not pinned & set(security), o["metadata"]["name"]
            assert annotation == "restricted-v2", o["metadata"]["name"]
    assert seen == HOST_PATH_WORKLOADS


def test_restricted_v2_admits_every_pod_but_the_hostpath_probes(rendered: Path) -> None:
    for o, template in workloads(load(rendered)):
        problems = scc_problems(RESTRICTED_V2, template["spec"])
        if has_host_path(template):
            assert any("host directories are not allowed" in p for p in problems), problems
        else:
            assert problems == [], (o["metadata"]["name"], problems)


def test_restricted_v2_refuses_the_pods_of_plain_kubernetes() -> None:
    """Why the platform switch exists: the shipped pods pin 65532 (the PVCs need the
    fsGroup on plain Kubernetes), outside any namespace range OpenShift assigns."""
    objects = load(REPO / "manifests")
    (statefulset,) = [o for o in objects.values() if o["metadata"]["name"].endswith("-gp2")
                      and o["kind"] == "StatefulSet"]  # fmt: skip
    template = pod_template(statefulset)
    assert template is not None
    assert scc_problems(RESTRICTED_V2, template["spec"]) == [
        "runAsUser 65532: outside the namespace's range",
        "fsGroup 65532: not an allowed group",
    ]
    assert not any(name.startswith("openshift-") for name in objects)
    for _, template in workloads(objects):
        assert "annotations" not in template["metadata"]


def scc_of(rendered: Path) -> dict[str, Any]:
    scc: dict[str, Any] = yaml.safe_load(
        (rendered / "generated" / "openshift-securitycontextconstraints.yaml").read_text()
    )
    return scc


def test_the_scc_admits_the_hostpath_probes_and_nothing_more(rendered: Path) -> None:
    scc = scc_of(rendered)
    host_path = [(o, t) for o, t in workloads(load(rendered)) if has_host_path(t)]
    for o, template in host_path:
        assert scc_problems(scc, template["spec"]) == [], o["metadata"]["name"]
    # Exactly the volume types they use (projected: the etcd probes' API token, in the pod
    # spec so that this SCC allows it; without it the API server's own token volume would be
    # refused).
    used = {volume_type(v) for _, t in host_path for v in t["spec"]["volumes"]}
    assert used == {"configMap", "emptyDir", "ephemeral", "hostPath", "projected", "secret"}
    assert set(scc["volumes"]) == used
    # Each request for more is refused.
    spec = host_path[0][1]["spec"]
    more: list[tuple[str, Any]] = [
        ("securityContext.runAsUser", 0),
        ("securityContext.runAsUser", 1000),
        ("securityContext.fsGroup", 0),
        ("securityContext.supplementalGroups", [0]),
        ("hostNetwork", True),
        ("volumes", [*spec["volumes"], {"name": "nfs", "nfs": {"server": "x", "path": "/"}}]),
        ("containers.0.securityContext.privileged", True),
        ("containers.0.securityContext.allowPrivilegeEscalation", True),
        ("containers.0.securityContext.readOnlyRootFilesystem", False),
        ("containers.0.securityContext.capabilities", {"add": ["SYS_ADMIN"], "drop": ["ALL"]}),
        ("containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}),
        ("containers.0.securityContext.seccompProfile", {"type": "Unconfined"}),
        ("containers.0.ports", [{"containerPort": 1, "hostPort": 1}]),
    ]
    for path, value in more:
        changed = copy.deepcopy(spec)
        *parents, last = path.split(".")
        target: Any = changed
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value
        assert scc_problems(scc, changed), path


def test_the_scc_has_only_documented_fields(rendered: Path) -> None:
    scc = scc_of(rendered)
    assert set(scc) <= DOC_FIELDS
    assert set(scc) >= DOC_REQUIRED
    for field, types in STRATEGIES.items():
        assert scc[field]["type"] in types, field
    assert scc["users"] == scc["groups"] == []  # granted through RBAC only
    assert scc["allowHostDirVolumePlugin"] is True
    for field in ("allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts",
                  "allowPrivilegedContainer", "allowPrivilegeEscalation",
                  "defaultAllowPrivilegeEscalation"):  # fmt: skip
        assert scc[field] is False, field
    assert scc["requiredDropCapabilities"] == ["ALL"]
    assert scc["allowedCapabilities"] == scc["defaultAddCapabilities"] == []
    assert scc["priority"] == 0  # what an unset priority counts as: no preference
    assert scc["runAsUser"] == {"type": "MustRunAs", "uid": PROBE_USER}
    assert scc["fsGroup"]["ranges"] == [{"min": PROBE_USER, "max": PROBE_USER}]


def test_no_scc_without_a_hostpath_probe(tmp_path: Path) -> None:
    overrides = (
        "{ platform: 'openshift', etcd: { enabled: false },"
        " monitoring: { prometheusRule: { enabled: false }, dashboards: { enabled: false } } }"
    )
    subprocess.run(
        ["bash", str(GENERATE), str(tmp_path), "--tla-code", f"overrides={overrides}"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert not list((tmp_path / "generated").glob("openshift-*"))
    assert all(not has_host_path(t) for _, t in workloads(load(tmp_path)))


def test_the_pushgateway_tag_has_one_place_that_make_e2e_reads() -> None:
    """make e2e builds Debian's Pushgateway under the name of `pushgateway.image`, which it
    reads from manifests/lib/defaults.libsonnet (scripts/e2e/cluster.sh): run that very line.
    No other source spells the tag (the table of keys in docs/MANIFESTS.md is generated from
    it)."""
    source = (REPO / "scripts" / "e2e" / "cluster.sh").read_text()
    start = source.index("pgw_image=$(")
    end = source.index(")\n", start) + 1
    script = f'REPO={REPO}\n{source[start:end]}\nprintf %s "$pgw_image"'
    read = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    deployment = yaml.safe_load(
        (REPO / "manifests" / "generated" / "pushgateway-deployment.yaml").read_text()
    )
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert read.stdout == image
    assert re.fullmatch(r"quay\.io/prometheus/pushgateway:v\d+\.\d+\.\d+", image)
    # Generated copies: the manifests and the Helm chart's values (scripts/generate.d/32-chart.sh).
    spelt = subprocess.run(
        ["git", "grep", "-l", "-E", r"prometheus/pushgateway:v[0-9]", "--", ".",
         ":!manifests/generated", ":!tests/data", ":!charts/fioprobe/values.yaml"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert spelt == ["docs/MANIFESTS.md", "manifests/lib/defaults.libsonnet"]
    values = yaml.safe_load((REPO / "charts" / "fioprobe" / "values.yaml").read_text())
    assert values["pushgateway"]["image"] == image
    docs = (REPO / "docs" / "MANIFESTS.md").read_text()
    assert docs.count("pushgateway:v") == 1
    assert f'| `pushgateway.image` | string | `"{image}"` |' in docs


# --- on a real kube-apiserver ----------------------------------------------------------------


@pytest.fixture(scope="module")
def scc_crd() -> Path:
    """The SCC CRD of the pinned github.com/openshift/api, as the setup installed it."""
    if not SCC_CRD.is_file():
        pytest.fail(f"{SCC_CRD} is missing: run scripts/setup.sh (make setup)")
    return SCC_CRD


def _wait_established(kube: Kube, crd: str) -> None:
    for _ in range(30):  # a CRD just created has no status yet (see the apiserver fixture)
        waited = kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", crd)
        if waited.returncode == 0 or "accessor error" not in waited.stderr:
            break
        time.sleep(1)
    assert waited.returncode == 0, waited.stderr


def _pod_security_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "PodSecurity" in line]


@pytest.mark.slow
def test_every_pod_but_the_hostpath_probes_is_restricted(kube: Kube, rendered: Path) -> None:
    objects = load(rendered)
    for name, o in objects.items():
        if o["kind"] == "Namespace":
            created = kube.kubectl("apply", "-f", str(rendered / "generated" / name))
            assert created.returncode == 0, created.stderr
    restricted = {o["metadata"]["name"] for o in objects.values() if o["kind"] == "Namespace"
                  and o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
                  == "restricted"}  # fmt: skip
    assert restricted == {"fioprobe", "fioprobe-provision"}
    checked = 0
    for name, o in objects.items():
        template = pod_template(o)
        if template is None:
            continue
        result = kube.dry_run(f"--filename={rendered / 'generated' / name}")
        assert result.returncode == 0, result.stderr
        warnings = _pod_security_warnings(result.stderr)
        if has_host_path(template):
            assert o["metadata"]["namespace"] not in restricted
            assert warnings, name  # hostPath, reported by warn=restricted
            for warning in warnings:
                clauses = re.split(r"\), ", warning.split('"restricted:latest": ', 1)[1])
                assert all("hostPath" in clause for clause in clauses), warning
        else:
            assert o["metadata"]["namespace"] in restricted, name
            assert warnings == [], result.stderr
            checked += 1
    # 2 StorageClass CronJobs, 2 stream StatefulSets, the Pushgateway, the provisioning CronJob
    assert checked == 6


@pytest.mark.slow
def test_the_scc_is_accepted_and_bound_to_the_hostpath_probes_only(
    kube: Kube, rendered: Path, scc_crd: Path
) -> None:
    created = kube.kubectl("apply", "--server-side", "-f", str(scc_crd))
    assert created.returncode == 0, created.stderr
    _wait_established(kube, "crd/securitycontextconstraints.security.openshift.io")
    objects = load(rendered)
    for name, o in objects.items():
        if o["kind"] == "Namespace":
            assert kube.kubectl("apply", "-f", str(rendered / "generated" / name)).returncode == 0
    openshift = sorted(rendered.glob("generated/openshift-*.yaml"))
    assert [p.name for p in openshift] == [
        "openshift-clusterrole.yaml",
        "openshift-rolebinding-fioprobe-etcd.yaml",
        "openshift-rolebinding-fioprobe-nodes.yaml",
        "openshift-securitycontextconstraints.yaml",
    ]
    files = [f"--filename={p}" for p in openshift]
    checked = kube.dry_run(*files)
    assert checked.returncode == 0, checked.stderr
    # The check can fail: a misspelt field is refused by the CRD's schema.
    broken = rendered / "broken-scc.yaml"
    text = (rendered / "generated" / "openshift-securitycontextconstraints.yaml").read_text()
    broken.write_text(text.replace("allowHostPID:", "allowHostPid:"))
    refused = kube.dry_run(f"--filename={broken}")
    assert refused.returncode != 0 and "unknown field" in refused.stderr, refused.stderr
    applied = kube.kubectl("apply", *files)
    assert applied.returncode == 0, applied.stderr

    host_path = {
        (o["metadata"]["namespace"], t["spec"]["serviceAccountName"])
        for o, t in workloads(objects)
        if has_host_path(t)
    }
    assert host_path == {
        ("fioprobe-etcd", "fioprobe-etcd"),
        ("fioprobe-etcd", "fioprobe-continuous"),
        ("fioprobe-nodes", "fioprobe"),
    }
    namespaces = sorted(o["metadata"]["name"] for o in objects.values() if o["kind"] == "Namespace")
    accounts = {o["metadata"]["name"] for o in objects.values() if o["kind"] == "ServiceAccount"}
    for namespace in namespaces:
        for account in sorted(accounts | {"default"}):
            answer = kube.kubectl(
                "auth", "can-i", *USE_SCC,
                f"--as=system:serviceaccount:{namespace}:{account}", "-n", namespace,
            )  # fmt: skip
            expected = "yes" if (namespace, account) in host_path else "no"
            assert answer.stdout.strip() == expected, (namespace, account, answer.stderr)
    # Bound in its own namespace only.
    elsewhere = kube.kubectl(
        "auth", "can-i", *USE_SCC, "--as=system:serviceaccount:fioprobe-etcd:fioprobe-etcd",
        "-n", "fioprobe",
    )  # fmt: skip
    assert elsewhere.stdout.strip() == "no"
