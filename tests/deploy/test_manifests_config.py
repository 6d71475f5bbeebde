"""The manifests' configuration: defaults + params, checked.

manifests/lib/defaults.libsonnet is the schema (every key, its default and type);
manifests/lib/params.libsonnet checks a configuration against it and merges it over the
defaults. Here: the exact message for each kind of bad configuration (a table, as
blackbox_exporter tests its config errors), what the generator script prints for them, that
an explicit null renders the same as the default, how nested objects, lists and maps merge,
that the probe-facing parts of the schema (volume model, profile overrides) accept exactly
what fioprobe's strict loader accepts, and that the documented table of keys is current.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO
from fioprobe.fio.profiles import OVERRIDABLE
from fioprobe.target.config import ConfigError, load_config
from support.manifests import GENERATE, PREFIX, jsonnet, problems

PARAMS_DOC = REPO / "scripts" / "generate.d" / "31-manifests-params.sh"

#: Keys of the top level, as every "unknown key" message at that level lists them.
TOP_LEVEL = (
    "apiServer, configMountPath, continuous, dns, etcd, everyMinutes, failedJobsHistoryLimit, "
    "image, monitoring, namespace, perNode, platform, probeMountPath, probeResources, probeUser, "
    "profileTimeoutSeconds, provisioning, pushgateway, startingDeadlineSeconds, stateHostPath, "
    "storageClasses, successfulJobsHistoryLimit, version"
)
VOLUME_KEYS = "dedicated, iops, provisioner, size, throughput, type"
#: Renders without the mixin's rules and dashboards: they do not depend on these keys and
#: take most of the rendering time.
NO_MIXIN = {"monitoring": {"prometheusRule": {"enabled": False}, "dashboards": {"enabled": False}}}


def evaluate(expression: str, *layers: object) -> Any:
    """`expression` (jsonnet) with `c` bound to the merged configuration of `layers` over the
    defaults (not manifests/config.libsonnet)."""
    proc = jsonnet(
        "local c = (import 'manifests/lib/monitoring-config.libsonnet')"
        f".merged({{}}, {json.dumps(list(layers))}); {expression}"
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def merged(*layers: object) -> dict[str, Any]:
    """The merged configuration of `layers` over the defaults (not manifests/config.libsonnet)."""
    result: dict[str, Any] = evaluate("c", *layers)
    return result


def generate(tmp_path: Path, overrides: object) -> subprocess.CompletedProcess[str]:
    """The real generator script, as `make generate` and the end-to-end run call it."""
    text = overrides if isinstance(overrides, str) else json.dumps(overrides)
    return subprocess.run(
        ["bash", str(GENERATE), str(tmp_path), "--tla-code", f"overrides={text}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def rendered(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((out / "generated").glob("*.yaml"))}


# --- bad configurations and their exact messages ------------------------------------------

BAD = [
    # Unknown keys, at every level, with a suggestion when one is close.
    (
        "{ everyMinute: 1 }",
        [f"everyMinute: unknown key, did you mean everyMinutes? (expected one of: {TOP_LEVEL})"],
    ),
    (
        "{ storageclasses: [] }",
        [
            "storageclasses: unknown key, did you mean storageClasses? "
            f"(expected one of: {TOP_LEVEL})"
        ],
    ),
    ("{ prometheus: {} }", [f"prometheus: unknown key (expected one of: {TOP_LEVEL})"]),
    (
        "{ apiServer: { ports: [] } }",
        [
            "apiServer.ports: needs at least one port (a rule without ports would allow any "
            "egress), got []"
        ],
    ),
    (
        "{ etcd: { nodez: ['cp-0'] } }",
        [
            "etcd.nodez: unknown key, did you mean nodes? (expected one of: dataDir, enabled, "
            "hostPath, name, namespace, nodes, profiles, roleLabels, tolerations, volume)"
        ],
    ),
    (
        "{ pushgateway: { tls: { enable: true } } }",
        [
            "pushgateway.tls.enable: unknown key, did you mean enabled? "
            "(expected one of: caSecretName, enabled, serverName)"
        ],
    ),
    (
        "{ storageClasses: [{ name: 'gp2', volume: { size: '1Gi', tpye: 'gp2' },"
        " profiles: ['etcd-fsync'] }] }",
        [
            "storageClasses[0].volume.tpye: unknown key, did you mean type? "
            f"(expected one of: {VOLUME_KEYS})"
        ],
    ),
    (
        "{ etcd: { profiles: [{ name: 'etcd-fsync', runtim: 5 }] } }",
        [
            "etcd.profiles[0].runtim: unknown key, did you mean runtime? "
            "(expected one of: io_size, name, runtime, size)"
        ],
    ),
    (
        "{ etcd: { tolerations: [{ key: 'a', efect: 'NoSchedule' }] } }",
        [
            "etcd.tolerations[0].efect: unknown key, did you mean effect? "
            "(expected one of: effect, key, operator, tolerationSeconds, value)"
        ],
    ),
    # Values of the wrong type, null where null means nothing.
    ("{ everyMinutes: '5' }", ['everyMinutes: expected number, got string "5"']),
    ("{ namespace: null }", ["namespace: expected string, got null"]),
    ("{ pushgateway: { auth: true } }", ["pushgateway.auth: expected object, got boolean true"]),
    (
        "{ pushgateway: { auth: { enabled: 'yes' } } }",
        ['pushgateway.auth.enabled: expected boolean, got string "yes"'],
    ),
    ("{ etcd: { nodes: 'cp-0' } }", ['etcd.nodes: expected list of string, got string "cp-0"']),
    ("{ etcd: { nodes: ['cp-0', 1] } }", ["etcd.nodes[1]: expected string, got number 1"]),
    (
        "{ monitoring: { serviceMonitor: { labels: { team: 1 } } } }",
        ["monitoring.serviceMonitor.labels.team: expected string, got number 1"],
    ),
    (
        "{ pushgateway: { storageClassName: 3 } }",
        ["pushgateway.storageClassName: expected string or null, got number 3"],
    ),
    (
        "{ etcd: { profiles: ['etcd-fsync', 3] } }",
        ["etcd.profiles[1]: expected string or profile with overrides, got number 3"],
    ),
    ("'everyMinutes: 5'", ['the configuration: expected object, got string "everyMinutes: 5"']),
    # Values out of range.
    (
        "{ everyMinutes: 7 }",
        ["everyMinutes: must be a whole number of minutes that divides 60, got 7"],
    ),
    (
        "{ pushgateway: { replicas: 0 } }",
        ["pushgateway.replicas: must be 'auto' or a whole number of at least 1, got 0"],
    ),
    (
        "{ pushgateway: { replicas: 'many' } }",
        ["pushgateway.replicas: must be 'auto' or a whole number of at least 1, got \"many\""],
    ),
    (
        "{ pushgateway: { port: 70000 } }",
        ["pushgateway.port: must be a whole number from 1 to 65535, got 70000"],
    ),
    (
        "{ image: { pullPolicy: 'Sometimes' } }",
        ['image.pullPolicy: must be Always, IfNotPresent or Never, got "Sometimes"'],
    ),
    ("{ etcd: { nodes: ['a', 'a'] } }", ['etcd.nodes: must not name a node twice, got ["a","a"]']),
    (
        "{ platform: 'OpenShift' }",
        ["platform: must be 'kubernetes' or 'openshift', got \"OpenShift\""],
    ),
    (
        "{ pushgateway: { url: 'http://pgw.monitoring.svc' } }",
        [
            "pushgateway.url: must be http://host:port or https://host:port (a path may follow),"
            ' got "http://pgw.monitoring.svc"'
        ],
    ),
    # Items of lists: required keys, at least one profile, unique names.
    (
        "{ storageClasses: [{ name: 'gp2' }] }",
        ["storageClasses[0].profiles: is required", "storageClasses[0].volume: is required"],
    ),
    (
        "{ storageClasses: [{ name: 'gp2', volume: { type: 'gp2' }, profiles: [] }] }",
        [
            "storageClasses[0].profiles: needs at least one profile, got []",
            "storageClasses[0].volume.size: is required",
        ],
    ),
    (
        "{ perNode: { localDisks: [{ name: '', profiles: ['etcd-fsync'] }] } }",
        ['perNode.localDisks[0].name: must not be empty, got ""'],
    ),
    (
        "{ storageClasses: [{ name: 'gp2', volume: { size: '1Gi' }, profiles: ['etcd-fsync'] },"
        " { name: 'gp2', volume: { size: '2Gi' }, profiles: ['etcd-fsync'] }] }",
        ['storageClasses: name "gp2" appears more than once'],
    ),
    # Every problem at once, in key order.
    (
        "{ everyMinutes: 0, etcd: { nodez: [] }, pushgateway: { port: '9091' } }",
        [
            "etcd.nodez: unknown key, did you mean nodes? (expected one of: dataDir, enabled, "
            "hostPath, name, namespace, nodes, profiles, roleLabels, tolerations, volume)",
            "everyMinutes: must be a whole number of minutes that divides 60, got 0",
            'pushgateway.port: expected number, got string "9091"',
        ],
    ),
]


@pytest.mark.parametrize(("overrides", "messages"), BAD, ids=[b[0] for b in BAD])
def test_bad_configuration_is_refused_with_its_exact_message(
    overrides: str, messages: list[str]
) -> None:
    assert problems(overrides) == messages


def test_the_generator_prints_only_the_problems_and_fails(tmp_path: Path) -> None:
    """What a user running `make generate` sees: the lines naming the keys, no stack trace."""
    proc = generate(tmp_path, "{ everyMinute: 1, pushgateway: { tls: { enable: true } } }")
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        f"RUNTIME ERROR: {PREFIX}everyMinute: unknown key, did you mean everyMinutes? "
        f"(expected one of: {TOP_LEVEL})",
        f"{PREFIX}pushgateway.tls.enable: unknown key, did you mean enabled? "
        "(expected one of: caSecretName, enabled, serverName)",
    ]
    assert proc.stdout == ""
    assert not (tmp_path / "generated").exists()


def test_a_misspelt_key_in_the_users_config_file_is_named(tmp_path: Path) -> None:
    """The same check applies to manifests/config.libsonnet itself, not only to overrides."""
    config = (REPO / "manifests" / "config.libsonnet").read_text()
    assert "  everyMinutes: 5," in config
    (tmp_path / "config.libsonnet").write_text(
        config.replace("  everyMinutes: 5,", "  everyMinute: 1,")
    )
    proc = jsonnet(
        "(import 'manifests/main.libsonnet')(config=import '%s').config"
        % (tmp_path / "config.libsonnet")
    )
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == (
        f"RUNTIME ERROR: {PREFIX}everyMinute: unknown key, did you mean everyMinutes? "
        f"(expected one of: {TOP_LEVEL})"
    )


def test_a_misspelt_mixin_config_key_is_named() -> None:
    """monitoring.mixinConfig is passed to the mixin, which would ignore an unknown key."""
    code = "(import 'manifests/main.libsonnet')(config={}, overrides=%s).config.everyMinutes"
    proc = jsonnet(code % "{ monitoring: { mixinConfig: { etcdFsyncP99WarningSecond: 0.02 } } }")
    assert proc.returncode != 0
    first = proc.stderr.splitlines()[0]
    assert first.startswith(
        f"RUNTIME ERROR: {PREFIX}monitoring.mixinConfig.etcdFsyncP99WarningSecond: unknown key, "
        "did you mean etcdFsyncP99WarningSeconds? (expected one of: "
    ), first
    assert "clusterLabel" in first  # the mixin's keys are listed
    accepted = jsonnet(
        code % "{ monitoring: { mixinConfig: { etcdFsyncP99WarningSeconds: 0.02 } } }"
    )
    assert accepted.returncode == 0, accepted.stderr


def test_the_kube_prometheus_part_checks_its_config_too() -> None:
    proc = jsonnet(
        "(import 'manifests/kube-prometheus/fioprobe.libsonnet')"
        "(config={ pushgateway: { replica: 2 } }).pushgateway"
    )
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0].startswith(
        f"RUNTIME ERROR: {PREFIX}pushgateway.replica: unknown key, did you mean replicas?"
    )


def test_per_node_probes_without_a_target_are_refused(tmp_path: Path) -> None:
    proc = generate(tmp_path, {**NO_MIXIN, "perNode": {"enabled": True}})
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        f"RUNTIME ERROR: {PREFIX}perNode.enabled needs perNode.localDisks or perNode.storageClasses"
    ]


#: A per-node StorageClass target.
GP3 = {"name": "gp3", "volume": {"size": "1Gi"}, "profiles": ["etcd-fsync"]}


@pytest.mark.parametrize(
    ("targets", "names"),
    [
        ({"localDisks": [{**GP3, "volume": {}}], "storageClasses": [GP3]}, "gp3, gp3"),
        ({"localDisks": [{"name": "etcd-disk", "profiles": ["etcd-fsync"]}]}, "etcd-disk"),
    ],
)
def test_per_node_targets_need_names_of_their_own(
    tmp_path: Path, targets: dict[str, Any], names: str
) -> None:
    """A target's name is its groups' storageclass label: a local disk named like a per-node
    StorageClass, or like the etcd disks, would push another probe's grouping key (and the
    mixin could not tell per-node probes from etcd probes)."""
    proc = generate(tmp_path, {**NO_MIXIN, "perNode": {"enabled": True, **targets}})
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        f"RUNTIME ERROR: {PREFIX}perNode.localDisks and perNode.storageClasses need names of "
        f"their own, different from each other and from etcd.name, got {names}"
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"perNode": {"enabled": True,
                      "localDisks": [{"name": "state", "profiles": ["etcd-fsync"]}]}},
         "stateHostPath /var/lib/fioprobe/state overlaps the directories of perNode.localDisks "
         "state; give it a directory of its own"),
        ({"stateHostPath": "/var/lib/etcd-fioprobe/state"},
         "stateHostPath /var/lib/etcd-fioprobe/state overlaps etcd.hostPath "
         "/var/lib/etcd-fioprobe, the probed directory; give it a directory of its own"),
        # The deployment creates and hands over these directories: never among etcd's files.
        ({"stateHostPath": "/var/lib/etcd/fioprobe-state"},
         "stateHostPath /var/lib/etcd/fioprobe-state overlaps etcd.dataDir /var/lib/etcd; the "
         "probe's state must not be among etcd's files"),
        ({"etcd": {"hostPath": "/var/lib/etcd/fioprobe"}},
         "etcd.hostPath /var/lib/etcd/fioprobe overlaps etcd.dataDir /var/lib/etcd; give the "
         "probe a directory of its own beside etcd's data"),
    ],
)  # fmt: skip
def test_the_state_directory_is_no_probed_directory(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    """Node-local probes keep their state in stateHostPath because their probed hostPath
    may be written by tenants: a state directory inside one (or holding one) would undo it."""
    proc = generate(tmp_path, {**NO_MIXIN, **overrides})
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [f"RUNTIME ERROR: {PREFIX}{message}"]


#: A per-node DaemonSet with a local disk and a StorageClass, also on control-plane nodes.
PER_NODE_PROBES = {
    "enabled": True,
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
    "localDisks": [{"name": "nvme", "profiles": ["etcd-fsync"]}],
    "storageClasses": [
        {"name": "gp3", "volume": {"size": "8Gi"}, "profiles": ["etcd-fsync", "randread-iops"]}
    ],
}


def test_per_node_probes_are_expected_by_the_prometheus_rule(tmp_path: Path) -> None:
    """The PrometheusRule the manifests render expects every per-node target's profiles on
    every node that runs per-node probes (one static series each, no node): the node set comes
    from the pushes alone (the node inventory is off in the standalone manifests), and
    monitoring.mixinConfig switches the inventory on."""

    def rules(mixin_config: dict[str, Any]) -> list[dict[str, Any]]:
        monitoring = {"dashboards": {"enabled": False}, "mixinConfig": mixin_config}
        proc = generate(tmp_path, {"monitoring": monitoring, "perNode": PER_NODE_PROBES})
        assert proc.returncode == 0, proc.stderr
        # The mixin's rules and the deployment's group (the expected probes), each its own
        # PrometheusRule.
        return [
            r
            for name in ("monitoring-prometheusrule.yaml", "monitoring-expectedrule.yaml")
            for group in yaml.safe_load((tmp_path / "generated" / name).read_text())["spec"][
                "groups"
            ]
            for r in group["rules"]
        ]

    standalone = rules({})
    expected = [r for r in standalone if r.get("record") == "probe:fioprobe_expected_per_node:info"]
    assert [r["labels"] for r in expected] == [
        {"storageclass": "nvme", "profile": "etcd-fsync"},
        {"storageclass": "gp3", "profile": "etcd-fsync"},
        {"storageclass": "gp3", "profile": "randread-iops"},
    ]
    (nodes,) = [r for r in standalone if r.get("record") == "node:fioprobe_per_node:info"]
    # No node inventory for the per-node probes (the etcd nodes have their own, by role).
    assert "push_time_seconds" in nodes["expr"] and "kube_node_info" not in json.dumps(standalone)
    # The CronJob probes are expected as before, each with its own rule; the etcd probes,
    # found by role, on the etcd nodes (a rule of their own); Missing for each kind.
    assert sum(r.get("record") == "probe:fioprobe_expected:info" for r in standalone) == 5
    assert sum(r.get("record") == "probe:fioprobe_expected_etcd:info" for r in standalone) == 1
    assert sum(r.get("alert") == "FioProbeMissing" for r in standalone) == 3

    inventory = rules({"perNodeInventory": True})
    (nodes,) = [r for r in inventory if r.get("record") == "node:fioprobe_per_node_inventory:info"]
    # Control-plane nodes stay in the inventory: the DaemonSet tolerates their taint.
    assert (
        'kube_node_info unless on (cluster, node) kube_node_spec_taint{effect=~"NoSchedule|'
        'NoExecute", key!~"node[.]kubernetes[.]io/.+|node-role[.]kubernetes[.]io/control-plane"}'
    ) in nodes["expr"]


def test_kube_prometheus_mixin_config_has_the_per_node_probes() -> None:
    """kube-prometheus' addMixin gets the per-node probes through fioprobe.libsonnet's
    mixinConfig (example.jsonnet adds the node inventory)."""
    proc = jsonnet(
        "(import 'manifests/kube-prometheus/fioprobe.libsonnet')"
        f"(config={{ perNode: {json.dumps(PER_NODE_PROBES)} }}).mixinConfig"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["expectedPerNodeProbes"] == [
        {"storageclass": "nvme", "profile": "etcd-fsync"},
        {"storageclass": "gp3", "profile": "etcd-fsync"},
        {"storageclass": "gp3", "profile": "randread-iops"},
    ]
    example = (REPO / "manifests" / "kube-prometheus" / "example.jsonnet").read_text()
    assert "perNodeInventory: true" in example


# --- null, merging ------------------------------------------------------------------------


def test_explicit_null_renders_the_same_as_leaving_it_out(tmp_path: Path) -> None:
    """Every nullable default written out as null, and optional keys given as null."""
    shipped = merged()
    config = json.loads(
        jsonnet("(import 'manifests/lib/monitoring-config.libsonnet').merged("
                "import 'manifests/config.libsonnet')").stdout
    )  # fmt: skip
    nulls = {
        "pushgateway": {
            "url": None,
            "storageClassName": None,
            "groupsPerReplica": None,
            "tls": {"serverName": None},
        },
        "monitoring": {
            **NO_MIXIN["monitoring"],
            "dashboards": {"enabled": False, "namespace": None},
        },
        # Optional keys of list items: null is "not given" (the PVC's class is the name).
        "storageClasses": [
            {
                **sc,
                "storageClassName": None,
                "schedule": None,
                # Null where the shipped volume does not set it (gp2 has no provisioned IOPS).
                "volume": {"iops": None, **sc["volume"]},
            }
            for sc in config["storageClasses"]
        ],
    }
    assert shipped["pushgateway"]["storageClassName"] is None  # really the default
    without = generate(tmp_path / "without", NO_MIXIN)
    assert without.returncode == 0, without.stderr
    with_nulls = generate(tmp_path / "with", nulls)
    assert with_nulls.returncode == 0, with_nulls.stderr
    assert rendered(tmp_path / "with") == rendered(tmp_path / "without")
    pvc = yaml.safe_load(
        (tmp_path / "with" / "generated" / "pushgateway-persistentvolumeclaim.yaml").read_text()
    )
    assert "storageClassName" not in pvc["spec"]  # the cluster's default StorageClass
    gp2 = yaml.safe_load(
        (tmp_path / "with" / "generated" / "storageclasses-pvc-gp2.yaml").read_text()
    )
    assert gp2["spec"]["storageClassName"] == "gp2"


def test_a_nullable_key_takes_a_value() -> None:
    c = merged({"pushgateway": {"storageClassName": "gp3", "groupsPerReplica": 500}})
    assert c["pushgateway"]["storageClassName"] == "gp3"
    assert c["pushgateway"]["groupsPerReplica"] == 500


def test_nested_objects_merge_lists_replace_maps_drop_null_entries() -> None:
    defaults = merged()
    c = merged(
        {
            "etcd": {"nodes": ["cp-0"], "profiles": ["randread-iops"]},
            "probeResources": {"limits": {"memory": "512Mi"}},
            "monitoring": {"prometheusRule": {"labels": {"prometheus": None, "team": "storage"}}},
        }
    )
    # Nested objects: the keys not given keep their defaults.
    assert c["etcd"]["nodes"] == ["cp-0"]
    assert c["etcd"]["tolerations"] == defaults["etcd"]["tolerations"]
    assert len(c["etcd"]["tolerations"]) == 2
    # Lists replace the default list.
    assert c["etcd"]["profiles"] == ["randread-iops"]
    # Maps merge key by key; null removes a default entry.
    assert c["probeResources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert c["probeResources"]["requests"] == defaults["probeResources"]["requests"]
    assert c["monitoring"]["prometheusRule"]["labels"] == {"role": "alert-rules", "team": "storage"}


def test_later_layers_win_and_merge_into_earlier_ones() -> None:
    """manifests/config.libsonnet, then overrides (tests, the end-to-end run)."""
    c = merged(
        {"everyMinutes": 10, "etcd": {"nodes": ["cp-0"], "hostPath": "/a"}},
        {"everyMinutes": 15, "etcd": {"hostPath": "/b"}},
    )
    assert c["everyMinutes"] == 15
    assert c["etcd"]["nodes"] == ["cp-0"] and c["etcd"]["hostPath"] == "/b"


def test_list_items_are_completed_and_optional_keys_stay_absent() -> None:
    c = merged(
        {
            "storageClasses": [
                {"name": "gp2", "volume": {"size": "1Gi", "iops": None}, "profiles": ["etcd-fsync"]}
            ],
            "perNode": {"localDisks": [{"name": "nvme", "profiles": ["etcd-fsync"]}]},
        }
    )
    (sc,) = c["storageClasses"]
    assert sc == {
        "name": "gp2",
        "volume": {"type": "unknown", "size": "1Gi"},
        "profiles": ["etcd-fsync"],
        "etcdDisk": False,
        "provision": True,
    }
    assert c["perNode"]["localDisks"][0]["volume"] == {"type": "unknown"}
    assert c["perNode"]["localDisks"][0]["etcdDisk"] is False


# --- the schema's probe-facing parts against fioprobe's strict loader ------------------------


def _loader_keys(config: dict[str, Any], tmp_path: Path) -> set[str]:
    """The keys fioprobe's loader lists when it refuses an unknown key."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    found = re.search(r"expected one of: ([a-z_, ]+)\)", str(refused.value))
    assert found, str(refused.value)
    return set(found.group(1).split(", "))


def test_volume_and_profile_keys_are_the_ones_fioprobe_accepts(tmp_path: Path) -> None:
    schema = json.loads(
        jsonnet(
            "local d = import 'manifests/lib/defaults.libsonnet'; {"
            " volume: std.objectFields(d.parts.volume),"
            " profile: std.objectFields(d.parts.profile) }"
        ).stdout
    )
    target = {"name": "x", "directory": "/probe", "profiles": ["etcd-fsync"]}
    config = {"pushgateway": {"url": "http://127.0.0.1:9091"}}
    volume = _loader_keys({**config, "targets": [{**target, "volume": {"bogus": 1}}]}, tmp_path)
    assert set(schema["volume"]) == volume
    assert set(schema["profile"]) == {"name", *OVERRIDABLE}


def test_every_volume_key_and_profile_override_renders_a_config_fioprobe_loads(
    tmp_path: Path,
) -> None:
    volume = {
        "type": "gp3",
        "size": "20Gi",
        "iops": 4000,
        "throughput": "250Mi",
        "provisioner": "ebs.csi.aws.com",
        "dedicated": True,
    }
    profiles = [{"name": "etcd-fsync", "size": "2m", "io_size": "2m", "runtime": 10}]
    proc = generate(
        tmp_path,
        {
            **NO_MIXIN,
            "storageClasses": [
                {
                    "name": "fast",
                    "storageClassName": "gp3-fast",
                    "volume": volume,
                    "profiles": profiles,
                }
            ],
            "etcd": {"nodes": []},
        },
    )
    assert proc.returncode == 0, proc.stderr
    cm = yaml.safe_load((tmp_path / "generated" / "storageclasses-configmap.yaml").read_text())
    (path := tmp_path / "fast.yaml").write_text(cm["data"]["fast.yaml"])
    (target,) = load_config(path).targets
    assert target.volume.iops == 4000 and target.volume.dedicated
    assert target.profiles[0].overrides == {"size": "2m", "io_size": "2m", "runtime": "10"}
    pvc = yaml.safe_load((tmp_path / "generated" / "storageclasses-pvc-fast.yaml").read_text())
    assert pvc["spec"]["storageClassName"] == "gp3-fast"


# --- documentation -------------------------------------------------------------------------


def test_the_documented_table_of_keys_is_current(tmp_path: Path) -> None:
    doc = REPO / "docs" / "MANIFESTS.md"
    copy = tmp_path / "MANIFESTS.md"
    shutil.copy(doc, copy)
    subprocess.run(
        ["bash", str(PARAMS_DOC), str(copy)], check=True, capture_output=True, timeout=60
    )
    assert copy.read_text() == doc.read_text(), "run scripts/generate.d/31-manifests-params.sh"


def test_the_table_lists_every_key_with_its_type_and_default() -> None:
    text = (REPO / "docs" / "MANIFESTS.md").read_text()
    for row in (
        "| `pushgateway.storageClassName` | string or null | `null` |",
        "| `everyMinutes` | number | `5` |",
        "| `storageClasses[].volume` | volume model, required |  |",
        "| `perNode.nodeSelector` | map of string | `{}` |",
    ):
        assert row in text, row
    paths = json.loads(
        jsonnet(
            "local p = import 'manifests/lib/params.libsonnet';"
            "[r.key for r in p.rows(import 'manifests/lib/defaults.libsonnet')]"
        ).stdout
    )
    assert len(paths) > 60
    for path in paths:
        assert f"| `{path}` |" in text, path


@pytest.mark.parametrize(
    ("layer", "per_replica", "replicas"),
    [
        # The rule of docs/SIZING.md: H = sqrt(0.25 x T / c), c measured (81 us per group held).
        ({}, 900, 1),
        ({"everyMinutes": 1}, 400, 1),
        ({"everyMinutes": 15}, 1600, 1),
        # 1,000 nodes x (a local disk and 2 StorageClasses) x 2 profiles, plus the shipped
        # StorageClass and etcd probes.
        (
            {
                "perNode": {
                    "enabled": True,
                    "expectedNodes": 1000,
                    "localDisks": [{"name": "root", "profiles": ["etcd-fsync", "randread-iops"]}],
                    "storageClasses": [
                        {
                            "name": sc,
                            "volume": {"type": sc, "size": "8Gi"},
                            "profiles": ["etcd-fsync", "randread-iops"],
                        }
                        for sc in ("gp2", "gp3")
                    ],
                }
            },
            900,
            7,
        ),
        ({"pushgateway": {"groupsPerReplica": 500}, "perNode": {"expectedNodes": 100}}, 500, 1),
        ({"pushgateway": {"replicas": 3}}, 900, 3),
    ],
)
def test_the_sizing_rule_gives_groups_per_replica_and_replicas(
    layer: dict[str, Any], per_replica: int, replicas: int
) -> None:
    got = evaluate(
        "local sizing = import 'manifests/lib/sizing.libsonnet';"
        "{ perReplica: sizing.groupsPerReplica(c), replicas: sizing.replicas(c),"
        "  groups: sizing.expectedGroups(c) }",
        layer,
    )
    assert (got["perReplica"], got["replicas"]) == (per_replica, replicas), got


PER_NODE_1000 = {
    "enabled": True,
    "expectedNodes": 1000,
    "localDisks": [{"name": "root", "profiles": ["etcd-fsync", "randread-iops"]}],
}


@pytest.mark.parametrize(
    ("layer", "cpu_request"),
    [
        # 2,008 groups, 3 replicas of 670: 0.081 ms x 670^2 / 300 s = 12.1% of a CPU.
        ({"perNode": PER_NODE_1000}, "130m"),
        # A larger configured request wins.
        (
            {"perNode": PER_NODE_1000, "pushgateway": {"resources": {"requests": {"cpu": "0.3"}}}},
            "300m",
        ),
        # 2 replicas forced: 1,004 groups each need 27.3%; the configured limit caps it.
        (
            {
                "perNode": PER_NODE_1000,
                "pushgateway": {"replicas": 2, "resources": {"limits": {"cpu": "200m"}}},
            },
            "200m",
        ),
    ],
)
def test_sharded_replicas_request_the_cpu_of_their_share_and_spread_over_nodes(
    layer: dict[str, Any], cpu_request: str
) -> None:
    statefulset = evaluate(
        "(import 'manifests/components/pushgateway.libsonnet')(c).statefulSet", layer
    )
    template = statefulset["spec"]["template"]
    spec = template["spec"]
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == cpu_request
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    selects = spread["labelSelector"]["matchLabels"]
    assert selects and selects.items() <= template["metadata"]["labels"].items(), selects
