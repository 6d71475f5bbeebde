"""The provisioning probe's deployment (manifests/components/provisioning.libsonnet): which
classes its CronJob provisions, its namespace, its RBAC and its network policies, for the
configurations a user writes; what is refused, with its message; and, on a real kube-apiserver,
that the generated RBAC allows exactly what a run needs and that the CronJob's own command,
run as its ServiceAccount, provisions each class and pushes its group.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import fioprobe
from fioprobe import bounds
from fioprobe.provision.runner import DEADLINES
from support import kubeapi, provision_api, services
from support.manifests import jsonnet, problems, render
from support.paths import REPO

RBAC = "rbac.authorization.k8s.io/v1"
#: What a run needs, in the test namespace and cluster-wide: docs/PROVISIONING.md's list, as
#: the runner's tests grant it.
NAMESPACED_RULES = provision_api.NAMESPACED
CLUSTER_RULES = provision_api.CLUSTER


#: The shipped configuration's StorageClasses, in jsonnet.
SHIPPED = "(import 'manifests/config.libsonnet').storageClasses"


def entry(name: str, **fields: str) -> str:
    """A storageClasses entry in jsonnet, with `fields` (strings) beside the required keys."""
    extra = "".join(f", {key}: '{value}'" for key, value in fields.items())
    return f"{{ name: '{name}', volume: {{ size: '1Gi' }}, profiles: ['etcd-fsync']{extra} }}"


def objects(overrides: str = "{}") -> dict[str, Any]:
    """The provisioning component's objects, the Pushgateway's NetworkPolicy and the groups the
    mixin expects for a configuration (manifests/main.libsonnet; only what is asked for is
    evaluated)."""
    proc = jsonnet(
        f"local all = (import 'manifests/main.libsonnet')(overrides={overrides});"
        " { provisioning: all.provisioning, pushgatewayPolicy: all.pushgateway.networkPolicy,"
        " expected: all.mixinConfig.expectedProvisioning }"
    )
    assert proc.returncode == 0, proc.stderr
    rendered: dict[str, Any] = json.loads(proc.stdout)
    return rendered


def command(cronjob: dict[str, Any]) -> list[str]:
    spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args: list[str] = container["command"]
    return args


def values(args: list[str], option: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == option]


def provision_peer(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        peer
        for peer in policy["spec"]["ingress"][0]["from"]
        if peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/component")
        == "provision"
    ]


def test_by_default_each_storageclass_is_provisioned_by_one_cronjob() -> None:
    rendered = objects()
    p = rendered["provisioning"]
    assert set(p) == {
        "namespace", "isolation", "serviceAccount", "role", "roleBinding", "clusterRole",
        "clusterRoleBinding", "networkPolicy", "cronJob",
    }  # fmt: skip
    args = command(p["cronJob"])
    assert args[:2] == ["fioprobe", "provision"]
    assert values(args, "--storageclass") == ["gp2", "gp3"]
    assert values(args, "--namespace") == ["fioprobe-provision"]
    assert values(args, "--gateway") == ["http://fioprobe-pushgateway.fioprobe.svc:9091"]
    assert values(args, "--deadline") == []
    # Every 10 minutes, after the two probes' start offsets.
    assert p["cronJob"]["spec"]["schedule"] == "2-59/10 * * * *"
    assert p["cronJob"]["spec"]["concurrencyPolicy"] == "Forbid"
    # Each class's steps to their deadlines (the command's own defaults: the manifests repeat
    # them) and four Pushgateway calls (3 x 10 s each), for two classes, plus a minute.
    per_class = sum(DEADLINES.values())
    assert (
        p["cronJob"]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
        == 2 * (per_class + 4 * 30) + 60
    )
    assert provision_peer(rendered["pushgatewayPolicy"]) == [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "fioprobe"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/component": "provision",
                                        "app.kubernetes.io/name": "fioprobe"}},
    }]  # fmt: skip


def test_the_test_namespace_is_restricted_and_isolated() -> None:
    p = objects()["provisioning"]
    labels = p["namespace"]["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
    isolation = p["isolation"]
    assert isolation["metadata"]["namespace"] == "fioprobe-provision"
    assert isolation["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                                 "ingress": [], "egress": []}  # fmt: skip
    # The probe's own pod: the Pushgateway, DNS and the API server; nothing in.
    policy = p["networkPolicy"]
    assert policy["metadata"]["namespace"] == "fioprobe"
    assert (
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "provision"
    )
    assert policy["spec"]["ingress"] == []
    ports = [[port["port"] for port in rule["ports"]] for rule in policy["spec"]["egress"]]
    assert ports == [[9091], [53, 53], [443, 6443]]


def test_the_rbac_is_exactly_what_a_run_needs() -> None:
    p = objects()["provisioning"]
    assert p["role"]["metadata"]["namespace"] == "fioprobe-provision"
    assert p["role"]["rules"] == NAMESPACED_RULES
    assert p["clusterRole"]["rules"] == CLUSTER_RULES
    subject = {"kind": "ServiceAccount", "name": "fioprobe-provision", "namespace": "fioprobe"}
    assert p["roleBinding"]["metadata"]["namespace"] == "fioprobe-provision"
    assert p["roleBinding"]["subjects"] == [subject]
    assert p["roleBinding"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                           "name": "fioprobe-provision"}  # fmt: skip
    assert p["clusterRoleBinding"]["subjects"] == [subject]
    assert p["serviceAccount"]["automountServiceAccountToken"] is False
    spec = p["cronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "fioprobe-provision"
    assert spec["automountServiceAccountToken"] is False
    # The token in the probe's container alone.
    assert [v["name"] for v in spec["volumes"]] == ["tmp", "kube-api-access"]


@pytest.mark.parametrize(
    ("overrides", "classes"),
    [
        # Turned off for one class; a class probed twice is provisioned once.
        (
            f"{{ storageClasses: [{SHIPPED}[0] {{ provision: false }}, {SHIPPED}[1]] }}",
            ["gp3"],
        ),
        (
            f"{{ storageClasses: [{entry('a', storageClassName='fast')}, "
            f"{entry('b', storageClassName='fast')}] }}",
            ["fast"],
        ),
        # More classes, without a fio probe of their own; one named twice is there once.
        (
            "{ provisioning: { storageClasses: ['local-path', 'gp3'] } }",
            ["gp2", "gp3", "local-path"],
        ),
    ],
)
def test_which_classes_are_provisioned(overrides: str, classes: list[str]) -> None:
    p = objects(overrides)["provisioning"]
    assert values(command(p["cronJob"]), "--storageclass") == classes


@pytest.mark.parametrize(
    "overrides",
    [
        "{ provisioning: { enabled: false } }",
        f"{{ storageClasses: [sc {{ provision: false }} for sc in {SHIPPED}] }}",
    ],
)
def test_nothing_to_provision_deploys_nothing(overrides: str) -> None:
    rendered = objects(overrides)
    assert rendered["provisioning"] == {}
    assert provision_peer(rendered["pushgatewayPolicy"]) == []


def test_deadlines_and_the_schedule_reach_the_command() -> None:
    p = objects("{ provisioning: { deadlines: { bound: 30, attached: 600 }, everyMinutes: 15 } }")[
        "provisioning"
    ]
    args = command(p["cronJob"])
    assert values(args, "--deadline") == ["attached=600", "bound=30"]
    assert p["cronJob"]["spec"]["schedule"] == "2-59/15 * * * *"
    per_class = sum(
        {**{step.value: s for step, s in DEADLINES.items()}, "bound": 30, "attached": 600}.values()
    )
    assert (
        p["cronJob"]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
        == 2 * (per_class + 4 * 30) + 60
    )
    explicit = objects("{ provisioning: { schedule: '7 * * * *' } }")["provisioning"]
    assert explicit["cronJob"]["spec"]["schedule"] == "7 * * * *"


def test_a_class_given_nodes_runs_on_each_and_is_expected_on_each() -> None:
    """Its runs on their nodes, up to maxParallel at once: the Job's deadline counts them in
    rounds (three nodes two at a time: two rounds), and the mixin expects a group per node."""
    rendered = objects(
        "{ provisioning: { storageClasses: ['local-path'], maxParallel: 2,"
        " nodes: { 'local-path': ['w1', 'w2', 'w3'] } } }"
    )
    p = rendered["provisioning"]
    args = command(p["cronJob"])
    assert values(args, "--storageclass") == ["gp2", "gp3", "local-path"]
    assert values(args, "--nodes") == ["local-path=w1,w2,w3"]
    assert values(args, "--max-parallel") == ["2"]
    per_class = sum(DEADLINES.values()) + 4 * 30
    assert p["cronJob"]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == (
        (2 + 2) * per_class + 60
    )
    per_node = [{"storageclass": "local-path", "node": n} for n in ("w1", "w2", "w3")]
    assert rendered["expected"] == [{"storageclass": "gp2"}, {"storageclass": "gp3"}, *per_node]
    assert values(command(objects()["provisioning"]["cronJob"]), "--max-parallel") == []


def test_on_openshift_the_platform_assigns_the_pods_ids() -> None:
    """Neither the CronJob's pod nor the test pods it makes name a user or fsGroup there:
    restricted-v2 assigns them and refuses a pod that names others."""
    p = objects("{ platform: 'openshift' }")["provisioning"]
    args = command(p["cronJob"])
    assert values(args, "--platform") == ["openshift"]
    template = p["cronJob"]["spec"]["jobTemplate"]["spec"]["template"]
    assert "runAsUser" not in template["spec"]["securityContext"]
    assert template["metadata"]["annotations"] == {"openshift.io/required-scc": "restricted-v2"}
    assert values(command(objects()["provisioning"]["cronJob"]), "--platform") == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            "{ provisioning: { deadlines: { bond: 30 } } }",
            "provisioning.deadlines.bond: unknown key, did you mean bound? (expected one of: "
            "created, scheduled, bound, attached, running, written, pod_deleted, detached, "
            "volume_deleted)",
        ),
        (
            "{ provisioning: { deadlines: { bound: 0 } } }",
            "provisioning.deadlines: each deadline must be a whole number of seconds from 1 to "
            '3600, got {"bound":0}',
        ),
        (
            "{ provisioning: { everyMinutes: 7 } }",
            "provisioning.everyMinutes: must be a whole number of minutes that divides 60, got 7",
        ),
        (
            "{ provisioning: { storageClasses: ['a', 'a'] } }",
            'provisioning.storageClasses: must not name a class twice, got ["a","a"]',
        ),
        *(
            (
                f"{{ provisioning: {{ nodes: {{ 'local-path': {nodes} }} }} }}",
                "provisioning.nodes: each class must list from 1 to 1000 nodes, each a node name "
                f"(lower-case letters, digits, - and .), once, got {shown}",
            )
            for nodes, shown in (
                ("[]", '{"local-path":[]}'),
                ("['W1']", '{"local-path":["W1"]}'),
                ("['w..1']", '{"local-path":["w..1"]}'),
                ("['a.-b']", '{"local-path":["a.-b"]}'),
                ("['w1', 'w1']", '{"local-path":["w1","w1"]}'),
                ("[1, 'a']", '{"local-path":[1,"a"]}'),
                (
                    "['n%d' % i for i in std.range(1, 1001)]",
                    '{"local-path":["n1","n2","n3","n4","n...',
                ),
            )
        ),
        (
            "{ provisioning: { maxParallel: 0 } }",
            "provisioning.maxParallel: must be a whole number from 1 to 64, got 0",
        ),
        (
            "{ provisioning: { storageClasses: ['Fast_SSD'] } }",
            "provisioning.storageClasses[0]: must be a StorageClass name: lower-case letters, "
            "digits, - and ., starting and ending with a letter or digit, at most 253 "
            'characters, got "Fast_SSD"',
        ),
        (
            f"{{ storageClasses: [{entry('x', provision='yes')}] }}",
            'storageClasses[0].provision: expected boolean, got string "yes"',
        ),
    ],
)
def test_a_bad_provisioning_key_is_refused_naming_it(overrides: str, expected: str) -> None:
    assert problems(overrides) == [expected]


@pytest.mark.parametrize(
    "namespace",
    ["fioprobe", "fioprobe-etcd", "fioprobe-nodes", "kube-system", "default", "monitoring"],
)
def test_the_test_namespace_must_hold_nothing_else(namespace: str) -> None:
    """The probe may create and delete any pod there: never a namespace the deployment, the
    cluster or Prometheus uses."""
    overrides = f"{{ provisioning: {{ namespace: '{namespace}' }} }}"
    proc = jsonnet(f"(import 'manifests/main.libsonnet')(overrides={overrides}).provisioning")
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == (
        f"RUNTIME ERROR: fioprobe manifests config: provisioning.namespace {namespace} is a "
        "namespace of its own use (the deployment's, the cluster's or Prometheus'); the test "
        "claims and pods need one that holds nothing else"
    )


@pytest.mark.parametrize("field", ["name", "storageClassName"])
def test_a_provisioned_class_must_be_a_storageclass_name(field: str) -> None:
    """What every run of the CronJob would refuse fails the rendering; the entry's probe alone
    (provision off) may keep any label."""
    extra = "" if field == "name" else ", storageClassName: 'Fast_SSD'"
    name = "Fast_SSD" if field == "name" else "fast"
    entry = f"{{ name: '{name}', volume: {{ size: '1Gi' }}, profiles: ['etcd-fsync']{extra} }}"
    overrides = f"{{ storageClasses: [{entry}] }}"
    proc = jsonnet(f"(import 'manifests/main.libsonnet')(overrides={overrides}).provisioning")
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == (
        "RUNTIME ERROR: fioprobe manifests config: provisioning: Fast_SSD is not a StorageClass "
        "name (lower-case letters, digits, - and .), which every run would refuse; set "
        "provision: false on its storageClasses entry"
    )
    off = entry[:-2] + ", provision: false }"
    rendered = objects(f"{{ storageClasses: [{off}] }}")
    assert rendered["provisioning"] == {}


def test_the_chart_takes_the_commands_bounds() -> None:
    """maxParallel and the nodes per class, as the command bounds them (fioprobe.bounds)."""
    schema = json.loads((REPO / "charts" / "fioprobe" / "values.schema.json").read_text())
    keys = schema["properties"]["provisioning"]["properties"]
    parallel = keys["maxParallel"]
    assert (parallel["minimum"], parallel["maximum"]) == bounds.PROVISION_PARALLEL
    nodes = keys["nodes"]["additionalProperties"]
    assert (nodes["minItems"], nodes["maxItems"]) == bounds.PROVISION_NODES


def test_nodes_of_a_class_not_provisioned_are_refused() -> None:
    overrides = "{ provisioning: { nodes: { 'local-pth': ['w1'] } } }"
    proc = jsonnet(f"(import 'manifests/main.libsonnet')(overrides={overrides}).provisioning")
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == (
        "RUNTIME ERROR: fioprobe manifests config: provisioning.nodes names local-pth, not a "
        "class the probe provisions (gp2, gp3)"
    )


# --- on a real kube-apiserver ----------------------------------------------------------------

kube_apiserver = kubeapi.kube_apiserver
ACCOUNT = "system:serviceaccount:fioprobe:fioprobe-provision"


@pytest.fixture(scope="module")
def deployed(
    kube_apiserver: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[kubeapi.Kube, dict[str, Any], Path]]:
    """The generated provisioning objects applied for real (the probes' namespace first),
    StorageClasses gp2 and gp3 whose provisioner does not exist (this server runs no
    controller), and a token of the CronJob's ServiceAccount."""
    generated = render(tmp_path_factory.mktemp("manifests"))
    docs = {
        path.name: yaml.safe_load(path.read_text())
        for path in generated.glob("provisioning-*.yaml")
    }
    kube = kube_apiserver
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fioprobe"}}])
    kube.apply([docs["provisioning-namespace.yaml"]])
    kube.apply([doc for name, doc in sorted(docs.items()) if name != "provisioning-namespace.yaml"])
    kube.apply([
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
         "provisioner": "example.com/does-not-exist", "volumeBindingMode": "Immediate"}
        for name in ("gp2", "gp3")
    ])  # fmt: skip
    # What the controller-manager makes in every namespace (this server runs none).
    kube.apply([{"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "default", "namespace": "fioprobe-provision"}}])  # fmt: skip

    def granted() -> bool:
        can = kube.kubectl(
            "auth", "can-i", "watch", "volumeattachments.storage.k8s.io", f"--as={ACCOUNT}"
        )
        return can.stdout.strip() == "yes"

    services.wait_for(granted, timeout=60, what="the bindings to take effect")
    token = kube.token_file("fioprobe-provision", "fioprobe", tmp_path_factory.mktemp("token"))
    yield kube, docs["provisioning-cronjob.yaml"], token


def can_i(kube: kubeapi.Kube, verb: str, resource: str, namespace: str | None) -> str:
    args = provision_api.can_i_args(verb, resource, namespace)
    return kube.kubectl(*args, f"--as={ACCOUNT}").stdout.strip()


@pytest.mark.slow
def test_the_applied_rbac_allows_exactly_what_a_run_needs(
    deployed: tuple[kubeapi.Kube, dict[str, Any], Path],
) -> None:
    kube = deployed[0]
    allowed, denied = provision_api.rbac_questions("fioprobe-provision", "fioprobe")
    wrong = [(v, r, n) for v, r, n in allowed if can_i(kube, v, r, n) != "yes"]
    wrong += [(v, r, n) for v, r, n in denied if can_i(kube, v, r, n) != "no"]
    assert wrong == []
    secrets = kube.kubectl("get", "secrets", "-n", "fioprobe-provision", "-o", "json")
    assert json.loads(secrets.stdout)["items"] == []


@pytest.mark.slow
def test_the_cronjobs_command_provisions_each_class_as_its_account(
    deployed: tuple[kubeapi.Kube, dict[str, Any], Path], tmp_path: Path
) -> None:
    """The CronJob's command as generated, with the API server and the token a pod would get
    and a real Pushgateway in place of the Service's name: each class's run fails at `bound`
    (nothing provisions here) within its shortened deadline and is pushed to its group."""
    kube, cronjob, token = deployed
    args = command(cronjob)
    gateway_at = args.index("--gateway")
    pushgateway = services.pushgateway(tmp_path / "pushgateway").start()
    try:
        args = [*args[: gateway_at + 1], pushgateway.url, *args[gateway_at + 2 :]]
        proc = fioprobe(
            *args[1:], "--deadline", "bound=2", "--kube-server", kube.url,
            "--kube-token-file", str(token), "--kube-ca-file", str(kube.ca_file), timeout=180,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr.decode()
        out = proc.stdout.decode()
        assert (
            "gp2: FAILED (deadline in bound)" in out and "gp3: FAILED (deadline in bound)" in out
        ), out
        with urllib.request.urlopen(pushgateway.url + "/api/v1/metrics", timeout=30) as r:
            groups = json.load(r)["data"]
        pushed = sorted(
            g["labels"]["storageclass"]
            for g in groups
            if g["labels"].get("job") == "fioprobe_provision"
        )
        assert pushed == ["gp2", "gp3"]
    finally:
        pushgateway.stop()
