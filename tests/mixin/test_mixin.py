"""Tests of the monitoring mixin (mixin.libsonnet, config.libsonnet, alerts/).

Everything runs the real tools: jsonnet/jsonnetfmt (Debian), jsonnet-lint (.tools/bin) and
promtool (Debian's prometheus package). The promtool unit tests under alerts/tests/ run on
the committed rendered rules; the tests here also prove that those unit tests would catch a
broken rule (mutation tests), that the committed file is what the generator produces, and
that every threshold, window, selector and label name comes from config.libsonnet.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import continuous
import probe_health_scenarios
import pytest
import scenarios
import yaml
from observed import narrowed
from support import lanes
from support.paths import REPO

#: The mutation fixture's runs count in its first test's time (scripts/run-tests.sh's CPU lane).
pytestmark = pytest.mark.timeout(lanes.TEST_SECONDS)

#: The mixin's rules: the same for every deployment.
RULES = REPO / "alerts" / "out" / "rules.yaml"
#: The `fioprobe.expected` group (manifests/rules.jsonnet) of the shipped manifests, and of a
#: deployment with per-node probes and the node inventory: the deployment's facts as data.
EXPECTED = REPO / "alerts" / "out" / "expected.yaml"
EXPECTED_PER_NODE = REPO / "alerts" / "out" / "expected-per-node.yaml"
#: ... and of the shipped manifests as they are: the etcd disks found by role.
EXPECTED_ETCD_BY_ROLE = REPO / "alerts" / "out" / "expected-etcd-by-role.yaml"
#: ... and of the provisioning scenarios' deployment: provisioning groups, no probe.
EXPECTED_PROVISIONING = REPO / "alerts" / "out" / "expected-provisioning.yaml"
RULE_FILES = [RULES, EXPECTED, EXPECTED_PER_NODE, EXPECTED_ETCD_BY_ROLE, EXPECTED_PROVISIONING]
UNIT_TESTS = sorted((REPO / "alerts" / "tests").glob("*.yaml"))
RUNBOOKS = REPO / "docs" / "runbooks.md"

#: The alerts and recording rules other parts (dashboards, e2e, docs) rely on by name.
ALERT_NAMES = {
    "FioProbeEtcdFsyncLatencyHigh",
    "FioProbeBurstCreditsDepleted",
    "FioProbeLatencyRegression",
    "FioProbeLatencyOutlier",
    "FioProbeFailing",
    "FioProbeStale",
    "FioProbeMissing",
    "FioProbeStorageClassLatencyHigh",
    "FioProbeContinuousSyncHang",
    "FioProbeContinuousErrorBudgetBurn",
    "FioProbeContinuousStall",
    "FioProbeContinuousMissing",
    "FioProbeContinuousFailing",
    "FioProbeProvisioningFailing",
    "FioProbeProvisioningSlow",
    "FioProbeProvisioningObjectsLeft",
    "FioProbeProvisioningStale",
    "FioProbeProvisioningMissing",
}
#: The provisioning probe's alerts: a provisioning group is (cluster, storageclass, node), without
#: a profile; their descriptions name the group instead (test_alert_hygiene).
PROVISION_ALERTS = {name for name in ALERT_NAMES if name.startswith("FioProbeProvisioning")}
#: The continuous stream's alerts: a stream is (cluster, storageclass, node), without a
#: profile; their descriptions name the stream instead (test_alert_hygiene).
STREAM_ALERTS = {name for name in ALERT_NAMES if name.startswith("FioProbeContinuous")}
RECORD_NAMES = {
    f"probe:fioprobe_{op}_latency_seconds:{q}"
    for op in ("sync", "write", "read")
    for q in ("p50", "p99", "p999")
} | {
    "probe:push_time_seconds:max",
    "probe:push_seen_time_seconds:max",
    "probe:fioprobe_etcd_disk_stated:push_time_seconds",
    "stream:fioprobe_etcd_disk_stated:scrape_time_seconds",
    "probe:fioprobe_last_sync_latency_seconds:p99",
    "probe:fioprobe_last_sync_latency_seconds:p99_threshold",
    "probe:fioprobe_etcd_disk:info",
    "probe:fioprobe_runs_total:etcd_fsync_warning_slow",
    "probe:fioprobe_runs_total:etcd_fsync_critical_slow",
    "probe:fioprobe_runs_total:storageclass_fsync_slow",
    # Per-run conditions carried through a push gap.
    "probe:fioprobe_success:min",
    "probe:fioprobe_runs_total:failed",
    "probe:fioprobe_write_iops:depleted",
    "probe:fioprobe_last_sync_latency_seconds:sibling_ratio",
    # The continuous stream (alerts/continuous.libsonnet): its objective per stream, the
    # slow fraction over every window of continuousBurnRates, the stall window's counts, and
    # the streams the configuration deploys.
    "stream:fioprobe_continuous_sync_latency_seconds:objective",
    *(
        f"stream:fioprobe_continuous_sync_slow:ratio_rate{w}"
        for w in ("5m", "30m", "1h", "2h", "6h", "1d")
    ),
    "stream:fioprobe_continuous_sync_slow:increase1m",
    "stream:fioprobe_continuous_stall_seconds:increase1m",
    # The provisioning probe (alerts/provisioning.libsonnet): its groups' memory, their last
    # run's state carried through a push gap, each step's threshold, and the run numbers the
    # "N of the last M runs" alerts count.
    "provision:fioprobe_provision_seen_time_seconds:max",
    "provision:fioprobe_provision_last_run_timestamp_seconds:max",
    "provision:fioprobe_provision_step_duration_seconds:warning_threshold",
    "provision:fioprobe_provision_runs_total:max",
    "provision:fioprobe_provision_success:max",
    "provision:fioprobe_provision_objects_left:max",
    "provision:fioprobe_provision_last_step_duration_seconds:threshold_ratio",
    "provision:fioprobe_provision_runs_total:failed",
    "provision:fioprobe_provision_runs_total:objects_left",
    "provision:fioprobe_provision_runs_total:slow_step",
}
#: The deployment's group: the probes, streams and provisioned classes it runs ...
EXPECTED_RECORD_NAMES = {
    "probe:fioprobe_expected:info",
    "stream:fioprobe_continuous_expected:info",
    "provision:fioprobe_provision_expected:info",
}
#: ... and with per-node probes, those expected on every node that runs them.
PER_NODE_EXPECTED_RECORD_NAMES = EXPECTED_RECORD_NAMES | {
    "probe:fioprobe_expected_per_node:info",
    "node:fioprobe_per_node_inventory:info",
    "node:fioprobe_per_node:info",
    "node:fioprobe_expected_per_node:info",
}
#: ... and of a deployment with provisioning groups and no probe, those groups alone.
PROVISIONING_EXPECTED_RECORD_NAMES = {"provision:fioprobe_provision_expected:info"}
#: ... and with the etcd probes found by role, those expected on every etcd node.
ETCD_BY_ROLE_EXPECTED_RECORD_NAMES = EXPECTED_RECORD_NAMES | {
    "probe:fioprobe_expected_etcd:info",
    "node:fioprobe_etcd_inventory:info",
    "node:fioprobe_etcd:info",
    "node:fioprobe_expected_etcd:info",
}

#: A value for every _config key, each different from its default and from one another, so
#: that a default left anywhere in the rendered rules is visible (test_overrides_...).
OVERRIDES: dict[str, Any] = {
    "probeIntervalSeconds": 420,
    "pushMarginFraction": 0.3,
    "expectedProbes": [{"storageclass": "nvme-local", "profile": "etcd-wal", "node": "cp-9"}],
    "expectedPerNodeProbes": [{"storageclass": "nvme-pool", "profile": "etcd-wal"}],
    "clusterLabel": "k8s_cluster",
    "fioprobeSelector": 'fioprobe_env="prod"',
    "etcdRoleMemoryRuns": 9,
    "etcdProfile": "etcd-wal",
    "burstProfile": "iops-ceiling",
    "latencyWindowRuns": 3,
    "etcdFsyncP99WarningSeconds": 0.0123,
    "etcdFsyncP99CriticalSeconds": 0.0456,
    "etcdFsyncSlowRuns": 3,
    "etcdFsyncOfRuns": 4,
    "storageClassLatencyProfile": "sync-latency",
    # Bucket boundaries: the continuous stream's objectives use them (alerts/windows.libsonnet).
    "storageClassFsyncP99WarningSeconds": {"gp2": 0.008, "sc1": 0.128},
    "storageClassFsyncP99DefaultWarningSeconds": 2.048,
    "storageClassSlowRuns": 4,
    "storageClassOfRuns": 6,
    "intermittentSlowRuns": 7,
    "intermittentOfRuns": 19,
    "burstMinBurstToBaselineRatio": 1.7,
    "burstDepletedGapFraction": 0.15,
    "burstNonBurstingVolumeTypes": ["pd-ssd", "hyperdisk"],
    "burstDepletedRuns": 7,
    "regressionOffset": "3d",
    "regressionBaselineWindow": "13h",
    "regressionMinBaselineFraction": 0.7,
    "regressionRatio": 3.5,
    "regressionMinIncreaseSeconds": 0.0037,
    "regressionForRuns": 11,
    "regressionSelector": 'profile!~"noisy-.*"',
    "outlierRatio": 4.5,
    "outlierMinIncreaseSeconds": 0.0031,
    "outlierRuns": 9,
    "outlierMinSiblings": 11,
    "outlierSelector": 'profile!~"quiet-.*"',
    "failingRuns": 4,
    "staleAfterRuns": 8,
    "lostGroupMemory": "2d",
    "kubeStateMetricsGapTolerance": "7m",
    "perNodeInventory": True,
    "perNodeTolerations": [{"key": "example.com/gpu", "operator": "Exists"}],
    "perNodeInventorySelector": 'kube_node_labels{label_fioprobe_probe="yes"}',
    "runbookURLBase": "https://wiki.example.com/storage/fioprobe",
    "expectedStreams": [{"storageclass": "nvme-local", "node": "cp-9"}, {"storageclass": "pd-ssd"}],
    "expectedEtcdProbes": [{"storageclass": "etcd-nvme", "profile": "etcd-wal"}],
    "expectedEtcdStreams": [{"storageclass": "etcd-nvme"}],
    "etcdNodeRoles": ["etcd-host"],
    "continuousObjectiveRatio": 0.995,
    "continuousEtcdObjectiveSeconds": 0.016,
    "continuousBurnRates": [
        {"long": "2h", "short": "12m", "factor": 13, "severity": "critical"},
        {"long": "3d", "short": "6h", "factor": 1.5, "severity": "warning"},
    ],
    "continuousBurnMinSyncs": 444,
    "continuousHangCriticalSeconds": 37,
    "continuousStorageClassHangWarningSeconds": 83,
    "continuousStallWindow": "90s",
    "continuousStallSlowSyncs": 7,
    "continuousStallSeconds": 4.5,
    "continuousGapTolerance": "3m",
    "continuousMissingAfter": "11m",
    "continuousFailingAfter": "4m",
    "provisionIntervalSeconds": 840,
    "expectedProvisioning": [
        {"storageclass": "pd-balanced"},
        {"storageclass": "local-ssd", "node": "w9"},
    ],
    "provisionFailingRuns": 3,
    "provisionOfRuns": 4,
    "provisionSlowRuns": 3,
    "provisionSlowOfRuns": 6,
    "provisionStepWarningSeconds": {
        "default": {
            "created": 11,
            "scheduled": 71,
            "bound": 131,
            "attached": 151,
            "running": 141,
            "written": 41,
            "pod_deleted": 91,
            "detached": 211,
            "volume_deleted": 221,
        },
        "st1": {"attached": 47},
    },
    "provisionObjectsLeftRuns": 3,
    "provisionStaleAfterRuns": 6,
}

#: The only alert whose $value means nothing to a reader (it is always 0: the last run
#: failed); its description names the failure reason instead.
NO_VALUE_IN_DESCRIPTION = {
    "FioProbeFailing",
    "FioProbeMissing",
    "FioProbeContinuousMissing",
    "FioProbeProvisioningMissing",
}


def tool(name: str) -> str:
    """Path of a required tool; a missing tool fails (never skips) the test run."""
    found = shutil.which(name) or shutil.which(name, path=str(REPO / ".tools" / "bin"))
    assert found, f"{name} not found: run scripts/setup.sh"
    return found


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a tool from the repository root, keeping its output for assertion messages."""
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=lanes.RUN_SECONDS)
    if check:
        assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def render(config: dict[str, Any] | None = None, *tla: str) -> str:
    """Render the mixin's rules (alerts/rules.jsonnet) with _config overrides as a rule file in
    JSON (Prometheus and promtool read rule files with a YAML parser, which takes JSON as it
    is); with `tla` (e.g. "example=per-node"), manifests/rules.jsonnet's instead: the mixin and
    a deployment's `fioprobe.expected` group."""
    source = scenarios.RULES_JSONNET if tla else "alerts/rules.jsonnet"
    args = [a for pair in (("--tla-str", t) for t in tla) for a in pair]
    return run(
        tool("go-jsonnet"), "-J", ".", "--tla-code", f"config={json.dumps(config or {})}",
        *args, source,
    ).stdout  # fmt: skip


def rules_of(text: str) -> list[dict[str, Any]]:
    """All rules (recording and alerting) of a rendered rule file."""
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def alerts_of(text: str) -> list[dict[str, Any]]:
    """The alerting rules of a rendered rule file."""
    return [rule for rule in rules_of(text) if "alert" in rule]


def default_config() -> dict[str, Any]:
    """The rules' keys of config.libsonnet's _config, as jsonnet evaluates them. The
    dashboards' own keys (`dashboards`) reach no rule: tests/mixin/test_dashboards.py checks them;
    refuseUnknownKeys decides whether the others are checked (test_unknown_keys_*)."""
    out = run(tool("go-jsonnet"), "-J", ".", "-e", "(import 'config.libsonnet')._config").stdout
    config: dict[str, Any] = json.loads(out)
    del config["dashboards"]
    del config["refuseUnknownKeys"]
    return config


def literal(value: Any) -> str:
    """A config value as the mixin prints it (lib/util.libsonnet's num(): '%.10g')."""
    if isinstance(value, bool):
        raise TypeError("no boolean config keys expected")
    if isinstance(value, int | float):
        return f"{value:.10g}"
    return str(value)


def occurs(value: str, text: str) -> bool:
    """Whether `value` occurs in `text` as a whole token, not inside a longer name/number."""
    return re.search(rf"(?<![\w.\-]){re.escape(value)}(?![\w\-]|\.\d)", text) is not None


# --- promtool -------------------------------------------------------------------------------


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.stem)
def test_committed_rules_pass_promtool_check(rules: Path) -> None:
    """The committed rule files are what Prometheus and the PrometheusRule manifests load
    (FioProbeMissing has two rules, none is there twice)."""
    out = run(tool("promtool"), "check", "rules", str(rules)).stdout
    assert f"SUCCESS: {len(rules_of(rules.read_text()))} rules found" in out


def test_mixin_md_names_every_group_the_rules_define() -> None:
    """docs/MIXIN.md's table of the mixin's keys lists the recording and alert groups: every
    group the committed rules define is named there, and no other."""
    table = (REPO / "docs" / "MIXIN.md").read_text().split("| `prometheusRules`", 1)[1]
    rows = table.split("\n", 2)[:2]
    named = set(re.findall(r"`(fioprobe[.-][a-z.-]+)`", "\n".join(rows)))
    defined = {g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]}
    defined |= {g["name"] for g in yaml.safe_load(EXPECTED.read_text())["groups"]}
    assert named == defined, (sorted(defined - named), sorted(named - defined))


def test_every_alert_group_has_a_unit_test_file() -> None:
    """One promtool test file per alert group, so no group ships untested; the per-node
    scenarios and those of the etcd disks found by role have their own (they need other
    rules)."""
    groups = [g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]]
    alert_groups = {g.removeprefix("fioprobe-") for g in groups if not g.startswith("fioprobe.")}
    assert {p.stem for p in UNIT_TESTS} == alert_groups | set(scenarios.RULE_FILES)
    assert set(scenarios.RULE_FILES) == {
        "probe-health-per-node",
        "probe-health-etcd-by-role",
        "provisioning",
    }


@pytest.mark.parametrize("unit_test", UNIT_TESTS, ids=lambda p: p.stem)
def test_promtool_unit_tests(unit_test: Path) -> None:
    """Each alert group's must-fire and must-not-fire cases hold on the committed rules."""
    out = run(tool("promtool"), "test", "rules", str(unit_test)).stdout
    assert "SUCCESS" in out


def test_every_alert_has_firing_and_silent_cases() -> None:
    """A unit test file must both expect each alert to fire and expect it to stay silent."""
    firing: set[str] = set()
    silent: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    assert firing == ALERT_NAMES
    assert silent == ALERT_NAMES


#: config.libsonnet's provisionStepWarningSeconds.default, without the volume types' rows.
PROVISION_DEFAULT_THRESHOLDS = {
    "created": 15,
    "scheduled": 60,
    "bound": 120,
    "attached": 120,
    "running": 120,
    "written": 30,
    "pod_deleted": 60,
    "detached": 180,
    "volume_deleted": 180,
}

#: (unit test, _config mutation that must make it fail, what the unit test then misses).
MUTATIONS = [
    ("etcd", {"etcdFsyncP99WarningSeconds": 0.016}, "a p99 of 15 ms no longer fires"),
    ("etcd", {"etcdFsyncP99WarningSeconds": 0.0095}, "9.8 ms (every fsync in (8, 10] ms) fires"),
    ("etcd", {"etcdFsyncOfRuns": 2}, "slow, fast, slow no longer fires"),
    ("etcd", {"clusterLabel": "region"}, "clusters a and b merged into one probe"),
    ("storageclass-latency", {"storageClassFsyncP99WarningSeconds": {}}, "io2 judged at 64 ms"),
    ("storageclass-latency", {"storageClassSlowRuns": 2}, "two slow runs of four fire"),
    ("burst", {"burstNonBurstingVolumeTypes": []}, "gp3 with a wrong volume model fires"),
    ("burst", {"burstMinBurstToBaselineRatio": 1}, "gp2 of 990 GiB fires on noise"),
    ("burst", {"burstDepletedRuns": 2}, "two throttled runs fire"),
    ("burst", {"staleAfterRuns": 30}, "the removed probe's frozen depletion keeps firing"),
    ("latency-regression", {"regressionMinBaselineFraction": 0.1}, "the thin baseline fires"),
    ("probe-health", {"failingRuns": 2}, "a probe failing for two runs fires"),
    ("probe-health", {"staleAfterRuns": 4}, "the stopped probe is not stale in time"),
    ("probe-health", {"expectedProbes": []}, "removed probes stale, nothing missing"),
    ("probe-health-per-node", {"expectedPerNodeProbes": []}, "per-node groups never stale"),
    ("probe-health-per-node", {"perNodeInventory": False}, "listed node without groups silent"),
    (
        "probe-health-per-node",
        {"perNodeInventorySelector": "kube_node_info"},
        "control-plane nodes, where the DaemonSet does not run, are missing every probe",
    ),
    ("probe-health-per-node", {"perNodeTolerations": []}, "a node of a tolerated pool silent"),
    ("probe-health-per-node", {"clusterLabel": "region"}, "clusters a and b merged"),
    ("probe-health-per-node", {"staleAfterRuns": 4}, "the stopped node is not stale in time"),
    ("probe-health", {"lostGroupMemory": "2d"}, "the lost group turns Missing a day late"),
    (
        "probe-health-per-node",
        {"kubeStateMetricsGapTolerance": "2m"},
        "a 5-minute gap of kube-state-metrics flips the node inventory",
    ),
    ("etcd", {"intermittentSlowRuns": 7}, "slow every third run warns three runs late"),
    ("storageclass-latency", {"intermittentOfRuns": 17}, "every third run never makes 6 of 17"),
    ("latency-outlier", {"outlierRatio": 4}, "one node's disk at 3.5x its siblings is silent"),
    ("latency-outlier", {"outlierMinIncreaseSeconds": 0.0005}, "a quiet disk 0.6 ms up fires"),
    ("latency-outlier", {"outlierRuns": 4}, "three outlier runs no longer fire"),
    ("continuous", {"continuousHangCriticalSeconds": 45}, "the 120 s hang pages a scrape later"),
    ("continuous", {"continuousStallSlowSyncs": 6}, "five slow fdatasyncs in a row are silent"),
    ("continuous", {"continuousStallSeconds": 5.5}, "an fdatasync stuck 5.01 s is silent"),
    ("continuous", {"continuousGapTolerance": "30s"}, "failed scrapes interrupt the hang page"),
    ("continuous", {"continuousMissingAfter": "10m"}, "the stream gone is missing too late"),
    ("continuous", {"continuousFailingAfter": "3m"}, "EIO on every operation pages too late"),
    ("continuous-burn", {"continuousObjectiveRatio": 0.98}, "100 % slow pages later than stated"),
    ("continuous-burn", {"continuousBurnMinSyncs": 1}, "a new stream's early slow fsync warns"),
    (
        "continuous-burn",
        {"storageClassFsyncP99WarningSeconds": {"gp2": 0.064}},
        "gp2's stream at 60 ms meets a 64 ms objective: no warning",
    ),
    ("provisioning", {"provisionFailingRuns": 3}, "two failed runs of three no longer fire"),
    (
        "provisioning",
        {"provisionStepWarningSeconds": {"default": PROVISION_DEFAULT_THRESHOLDS}},
        "gp3's 90 s attach judged by the default 120 s: no longer slow",
    ),
    ("provisioning", {"provisionObjectsLeftRuns": 3}, "objects left by two runs in a row silent"),
    ("provisioning", {"provisionStaleAfterRuns": 5}, "the stopped class is not stale in time"),
]


#: The keys whose mutations only the memory scenarios notice.
MEMORY_KEYS = {"lostGroupMemory", "kubeStateMetricsGapTolerance"}


#: Every case of the test below: the unmutated rules first, through the same harness.
MUTATION_CASES = [("etcd", {}, "unmutated rules pass through the same harness"), *MUTATIONS]


#: The scenario group that caught each mutation when the file was last written: it runs first,
#: so a mutation costs one promtool run rather than every group before it. A hint changes no
#: verdict (when it does not catch, the others run in the file's order); one that no longer
#: catches fails test_mutation_catchers_are_current, which says how to write the file again.
CATCHERS = REPO / "tests" / "data" / "mixin" / "mutation-catchers.json"
WRITE_CATCHERS = "FIOPROBE_WRITE_MUTATION_CATCHERS"


def _case_key(unit_test: str, mutation: dict[str, Any]) -> str:
    return f"{unit_test} {json.dumps(mutation, sort_keys=True)}"


def _catchers() -> dict[str, str]:
    if os.environ.get(WRITE_CATCHERS) or not CATCHERS.exists():
        return {}
    catchers: dict[str, str] = json.loads(CATCHERS.read_text())
    return catchers


def _mutated_run(
    workdir: Path, unit_test: str, mutation: dict[str, Any], first: str | None
) -> tuple[Any, str | None]:
    """promtool on `unit_test`'s scenarios against the rules rendered with `mutation`. The
    scenarios about the rules' memory (restart and gap twins, a day-long lost group) run only
    for the keys of that memory: they are the slowest, and no other key reaches them.

    The unmutated rules run the whole file in one promtool run, which must pass. A mutation is
    caught when any one test group fails, so its groups run one at a time, in the file's
    order, until one fails: the same verdict as the whole file's, without evaluating the
    groups after the one that caught it (promtool evaluates every rule at every step of every
    group, so each group skipped is CPU time saved); the group named `first` runs first.
    Returns the last run and the name of the group that caught the mutation (None when none
    did, or unmutated)."""
    rules = workdir / "rules.yaml"
    config = {**scenarios.deployment_config(unit_test), **mutation}
    rules.write_text(render(config, f"example={scenarios.example(unit_test)}"))
    if unit_test in scenarios.GROUPS:
        memory = bool(MEMORY_KEYS & set(mutation))
        document = scenarios.document(unit_test, 5, str(rules), memory=memory)
    else:
        committed = "".join(f"- {path}\n" for path in scenarios.rule_files(unit_test))
        source = (REPO / "alerts" / "tests" / f"{unit_test}.yaml").read_text()
        assert f"\nrule_files:\n{committed}" in source
        document = yaml.safe_load(
            source.replace(f"\nrule_files:\n{committed}", "\nrule_files:\n- rules.yaml\n")
        )
    # Only the groups the checks can observe (alerts/tests/observed.py): a mutation of a
    # group no check reads changes no verdict.
    only, document = narrowed(yaml.safe_load(rules.read_text()), document)
    rules.write_text(yaml.safe_dump(only))
    ordered = sorted(document["tests"], key=lambda group: group["name"] != first)  # stable
    parts = [document] if not mutation else [{**document, "tests": [group]} for group in ordered]
    proc = None
    for number, part in enumerate(parts):
        test_file = workdir / f"{unit_test}-{number}.yaml"
        test_file.write_text(yaml.safe_dump(part))
        proc = run(tool("promtool"), "test", "rules", str(test_file), check=False)
        if proc.returncode != 0:
            return proc, part["tests"][0]["name"] if mutation else None
    assert proc is not None, f"{unit_test}: no test group"
    return proc, None


@pytest.fixture(scope="module")
def mutated_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Every case's promtool run, as many at a time as there are CPUs: each renders and
    tests in a directory of its own, and the cases are independent (minutes apart, one by
    one)."""
    base = tmp_path_factory.mktemp("mutations")
    catchers = _catchers()

    def one(index: int) -> Any:
        workdir = base / str(index)
        workdir.mkdir()
        unit_test, mutation, _ = MUTATION_CASES[index]
        return _mutated_run(
            workdir, unit_test, mutation, catchers.get(_case_key(unit_test, mutation))
        )

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(pool.map(one, range(len(MUTATION_CASES))))


@pytest.mark.parametrize(
    "index",
    range(len(MUTATION_CASES)),
    ids=[f"{case[0]}-{index}" for index, case in enumerate(MUTATION_CASES)],
)
def test_unit_tests_catch_broken_rules(mutated_runs: list[Any], index: int) -> None:
    """The promtool tests are only worth something if a wrong rule makes them fail."""
    unit_test, mutation, why = MUTATION_CASES[index]
    proc, _ = mutated_runs[index]
    if mutation:
        assert proc.returncode != 0, f"{unit_test}.yaml did not notice: {why}"
        assert "FAILED" in proc.stdout + proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mutation_catchers_are_current(mutated_runs: list[Any]) -> None:
    """Each mutation's hint is the group that caught it; with FIOPROBE_WRITE_MUTATION_CATCHERS=1
    the run writes them (every group in the file's order, then the first that caught)."""
    caught = {
        _case_key(unit_test, mutation): catcher
        for (unit_test, mutation, _), (_, catcher) in zip(MUTATION_CASES, mutated_runs, strict=True)
        if mutation and catcher is not None
    }
    if os.environ.get(WRITE_CATCHERS):
        CATCHERS.parent.mkdir(parents=True, exist_ok=True)
        CATCHERS.write_text(json.dumps(caught, indent=1, sort_keys=True) + "\n")
    written = json.loads(CATCHERS.read_text()) if CATCHERS.exists() else {}
    assert caught == written, (
        f"run {WRITE_CATCHERS}=1 pytest tests/mixin/test_mixin.py -k mutation and commit "
        f"{CATCHERS.relative_to(REPO)}"
    )


# --- jsonnet hygiene and reproducibility ----------------------------------------------------


def test_jsonnet_lint_script_fails_on_a_finding(tmp_path: Path) -> None:
    """`make lint` runs scripts/lint-jsonnet.sh over every jsonnet file: it must pass a clean
    file and exit non-zero, naming the file, on a formatting or a lint finding."""
    clean = tmp_path / "clean.libsonnet"
    clean.write_text("local u = import 'lib/util.libsonnet';\n{ ops: u.ops }\n")
    unformatted = tmp_path / "unformatted.libsonnet"
    unformatted.write_text("{ a:   1 }\n")
    unused = tmp_path / "unused.libsonnet"
    unused.write_text("local x = 1;\n{ a: 2 }\n")
    script = "scripts/lint-jsonnet.sh"
    assert run("bash", script, str(clean), check=False).returncode == 0
    for bad in (unformatted, unused):
        proc = run("bash", script, str(clean), str(bad), check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"{bad}: " in proc.stdout and f"{clean}: " not in proc.stdout


def test_committed_continuous_tests_are_what_their_generator_writes(tmp_path: Path) -> None:
    """alerts/tests/continuous*.yaml come from alerts/tests/continuous.py (the pushed probes'
    from scenarios.py: tests/mixin/test_mixin_schedules.py)."""
    continuous.main(["continuous.py", str(tmp_path)])
    written = sorted(tmp_path.glob("*.yaml"))
    assert [p.name for p in written] == ["continuous-burn.yaml", "continuous.yaml"]
    for path in written:
        committed = REPO / "alerts" / "tests" / path.name
        assert committed.read_text() == path.read_text(), f"{path.name}: run scripts/generate.sh"


def test_committed_rules_are_what_the_generator_renders(tmp_path: Path) -> None:
    """alerts/out/*.yaml must be regenerated whenever the mixin changes."""
    run("bash", "scripts/generate.d/10-mixin.sh", str(tmp_path))
    for rules in RULE_FILES:
        fresh = (tmp_path / rules.name).read_text()
        assert fresh == rules.read_text(), "run scripts/generate.sh and commit alerts/out/"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(r.name for r in RULE_FILES), (
        "temporary file left behind"
    )


def test_the_mixin_uses_only_what_the_oldest_jsonnet_it_supports_has() -> None:
    """Users import the mixin with whatever jsonnet they have, and the demo renders its rules
    with Debian's (C++, 0.18, which lacks std.all, std.any, std.sum and others, while go-jsonnet,
    which renders the committed files, has them): every std function the mixin's own files
    call must exist there. (The demo's tests render the rules with it; this covers the
    dashboards too, in a second instead of a minute's render.)"""
    sources = [REPO / "mixin.libsonnet", REPO / "config.libsonnet"] + [
        path
        for folder in ("alerts", "dashboards", "lib")
        for pattern in ("*.libsonnet", "*.jsonnet")
        for path in sorted((REPO / folder).rglob(pattern))
    ]
    call = re.compile(r"\bstd\.([A-Za-z0-9_]+)")
    called = sorted({name for path in sources for name in call.findall(path.read_text())})
    assert "objectHasAll" in called and len(called) > 20, called
    missing = run(tool("jsonnet"), "-e",
                  f"[n for n in {json.dumps(called)} if !std.objectHasAll(std, n)]")  # fmt: skip
    assert json.loads(missing.stdout) == [], "not in Debian's jsonnet 0.18's std"


def test_mixin_entry_point_fields() -> None:
    """The mixin exposes what kube-prometheus' addMixin and the dashboards engineer expect."""
    out = run(
        tool("go-jsonnet"),
        "-J",
        ".",
        "-e",
        "local m = import 'mixin.libsonnet'; "
        "{ config: std.objectHasAll(m, '_config'), rules: std.objectHasAll(m, 'prometheusRules'),"
        " alerts: std.objectHasAll(m, 'prometheusAlerts'),"
        " dashboards: std.objectHasAll(m, 'grafanaDashboards') }",
    ).stdout
    assert json.loads(out) == {"config": True, "rules": True, "alerts": True, "dashboards": True}


# --- contract and hygiene of the rendered rules ---------------------------------------------


def test_rule_names_are_the_contract() -> None:
    """Dashboards and the end-to-end test use these exact names; every alert is in the
    mixin's rules, and a deployment's group holds recording rules only."""
    rules = rules_of(RULES.read_text())
    assert {r["record"] for r in rules if "record" in r} == RECORD_NAMES
    assert {r["alert"] for r in rules if "alert" in r} == ALERT_NAMES
    for path, records in (
        (EXPECTED, EXPECTED_RECORD_NAMES),
        (EXPECTED_PER_NODE, PER_NODE_EXPECTED_RECORD_NAMES),
        (EXPECTED_ETCD_BY_ROLE, ETCD_BY_ROLE_EXPECTED_RECORD_NAMES),
        (EXPECTED_PROVISIONING, PROVISIONING_EXPECTED_RECORD_NAMES),
    ):
        groups = yaml.safe_load(path.read_text())["groups"]
        assert [g["name"] for g in groups] == ["fioprobe.expected"], path.name
        assert {r.get("record") for r in groups[0]["rules"]} == records, path.name


@pytest.mark.parametrize("rules", [RULES], ids=lambda p: p.stem)
def test_alert_hygiene(rules: Path) -> None:
    """Mixin conventions (node-mixin, kubernetes-mixin) that on-call tooling relies on."""
    anchors = set(re.findall(r"^## (FioProbe\w+)$", RUNBOOKS.read_text(), flags=re.M))
    for rule in alerts_of(rules.read_text()):
        name = rule["alert"]
        assert re.fullmatch(r"FioProbe(?:[A-Z][a-z0-9]*)+", name), name
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, name
        assert notes["summary"][0].isupper() and notes["summary"].endswith("."), name
        assert "{{" not in notes["summary"], f"{name}: summary must be a static sentence"
        assert "$labels.storageclass" in notes["description"], name
        if name in STREAM_ALERTS or name in PROVISION_ALERTS:
            # A stream or a provisioning group has no profile: its description names the node
            # and the cluster.
            assert "$labels.node" in notes["description"], name
            assert "$labels.cluster" in notes["description"], name
        else:
            assert "$labels.profile" in notes["description"], name
        if name not in NO_VALUE_IN_DESCRIPTION:
            assert "$value" in notes["description"], name
        base = default_config()["runbookURLBase"]
        assert notes["runbook_url"] == f"{base}#{name.lower()}", name
        assert name in anchors, f"docs/runbooks.md has no section '## {name}'"
    assert anchors == ALERT_NAMES, "runbooks for alerts that do not exist"


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.stem)
def test_no_dependence_on_job_or_instance(rules: Path) -> None:
    """OpenShift user-workload monitoring renames job/instance to exported_*."""
    for rule in rules_of(rules.read_text()):
        text = rule["expr"] + json.dumps(rule.get("annotations", {}))
        assert not re.search(r"(?<![\w.])(job|instance)(?!\w)", text), rule


@pytest.mark.parametrize("rules", [RULES], ids=lambda p: p.stem)
def test_etcd_disks_are_selected_by_their_published_role(rules: Path) -> None:
    """Which disks hold etcd is a deployment fact (fioprobe_info{etcd_disk}): the etcd rules
    join on the role record and no rule takes `node`-labelled series for etcd disks. The
    only `node!=""` matchers left are the per-node probes' own bookkeeping."""
    by_name = {r.get("record") or r.get("alert"): r for r in rules_of(rules.read_text())}
    role = by_name["probe:fioprobe_etcd_disk:info"]["expr"]
    assert 'etcd_disk="true"' in role and 'etcd_disk="false"' in role, role
    # Each source's statements, with their times: the probes' pushes and the streams' scrapes.
    stated = 'etcd_disk=~"true|false"'
    pushed = by_name["probe:fioprobe_etcd_disk_stated:push_time_seconds"]["expr"]
    assert f'fioprobe_info{{storageclass!="", benchmark="", {stated}}}' in pushed
    assert "probe:push_time_seconds:max" in pushed
    scraped = by_name["stream:fioprobe_etcd_disk_stated:scrape_time_seconds"]["expr"]
    assert f'timestamp(fioprobe_continuous_info{{storageclass!="", benchmark="", {stated}}})' in (
        scraped
    )
    for check in ("etcd_fsync_warning", "etcd_fsync_critical"):
        expr = by_name[f"probe:fioprobe_runs_total:{check}_slow"]["expr"]
        assert "and on (cluster, storageclass, node)\nprobe:fioprobe_etcd_disk:info" in expr
    sc = by_name["probe:fioprobe_runs_total:storageclass_fsync_slow"]["expr"]
    assert "unless on (cluster, storageclass, node)\nprobe:fioprobe_etcd_disk:info" in sc
    # A continuous stream's own role is enough, and its etcd_disk="false" wins as a probe's
    # (and while any of its pods says so).
    for value in ("true", "false"):
        for record in ("probe:fioprobe_etcd_disk_stated:push_time_seconds",
                       "stream:fioprobe_etcd_disk_stated:scrape_time_seconds"):  # fmt: skip
            assert f'{record}{{etcd_disk="{value}"}}' in role, role
    said_now = 'fioprobe_continuous_info{storageclass!="", benchmark="", etcd_disk="false"}'
    assert said_now in role, role
    # The stream alerts: on etcd disks (critical hang, stall, pages) only by the role, and
    # the StorageClass variants only without it.
    stream_rules = [
        r
        for r in rules_of(rules.read_text())
        if r.get("alert", "").startswith("FioProbeContinuous")
    ]
    for rule in stream_rules:
        expr, severity = rule["expr"], rule["labels"]["severity"]
        if rule["alert"] == "FioProbeContinuousMissing":
            continue
        if severity == "critical" or rule["alert"] == "FioProbeContinuousStall":
            assert "and on (cluster, storageclass, node)\nprobe:fioprobe_etcd_disk:info" in expr, (
                rule
            )
        elif "probe:fioprobe_etcd_disk:info" in expr:
            assert (
                "unless on (cluster, storageclass, node)\nprobe:fioprobe_etcd_disk:info" in expr
            ), rule
    for rule in rules_of(rules.read_text()):
        if 'node!=""' in rule["expr"]:
            assert "per_node" in rule["expr"] or "per_node" in rule.get("record", ""), rule


@pytest.mark.parametrize("rules", RULE_FILES, ids=lambda p: p.stem)
def test_every_aggregation_keeps_the_probe_identity(rules: Path) -> None:
    """Every `by (...)` keeps cluster, storageclass and node, so that neither clusters nor
    control-plane nodes with the same StorageClass name are ever merged. The per-node
    probes' node set is one series per cluster and node, and whether a cluster's node
    inventory lists any node is one per cluster."""
    seen = 0
    for rule in rules_of(rules.read_text()):
        for labels in re.findall(r"\bby \(([^)]*)\)", rule["expr"]):
            names = {label.strip() for label in labels.split(",")}
            if rule.get("record") in ("node:fioprobe_per_node:info", "node:fioprobe_etcd:info"):
                assert names in ({"cluster", "node"}, {"cluster"}), (rule, labels)
            elif rule.get("record") in (
                "node:fioprobe_per_node_inventory:info",
                "node:fioprobe_etcd_inventory:info",
            ):
                assert names == {"cluster", "node"}, (rule, labels)
            elif rule.get("record") == "probe:fioprobe_last_sync_latency_seconds:sibling_ratio":
                # Siblings: the same StorageClass and profile on every node of a cluster.
                assert names >= {"cluster", "storageclass", "profile"}, (rule, labels)
            else:
                assert {"cluster", "storageclass", "node"} <= names, (rule, labels)
            seen += 1
    if rules == RULES:
        assert seen >= 9 + 5, "the aggregation pattern above matched too little to mean anything"


def test_overrides_cover_every_config_key() -> None:
    """A new _config key must be added to OVERRIDES, so the test below checks it too."""
    defaults = default_config()
    assert set(OVERRIDES) == set(defaults)
    for key, value in OVERRIDES.items():
        assert value != defaults[key], key


def test_overrides_leave_no_default_literal(tmp_path: Path) -> None:
    """Rendered with every key overridden, no default may remain in any expression, `for`
    or description, and every override must show up (each key is actually used)."""
    defaults = default_config()
    text = render(OVERRIDES)
    (tmp_path / "rules.yaml").write_text(text)
    run(tool("promtool"), "check", "rules", str(tmp_path / "rules.yaml"))
    rules = rules_of(text)
    # A per-node probe's groups are the ones with a node: `node!=""` there is what a per-node
    # group is; nothing else may select by it (test_no_rule_selects_etcd_disks_by_node).
    exprs = "\n".join(
        r["expr"].replace('node!=""', "") if "per_node" in r["expr"] else r["expr"] for r in rules
    )
    checked = "\n".join(
        [exprs]
        + [r.get("for", "") for r in rules]
        + [r["annotations"]["description"] for r in rules if "alert" in r]
        + [r["annotations"]["runbook_url"] for r in rules if "alert" in r]
    )

    cluster = defaults["clusterLabel"]
    defaults = {k: v for k, v in defaults.items() if k not in DERIVED_KEYS}
    assert not occurs(cluster, exprs), f"hard-coded {cluster!r} in an expression"
    assert f"$labels.{cluster} " not in checked, "description names the default cluster label"
    assert not re.search(rf'(?<![\w.]){cluster}="', checked), "template query with default label"
    for key, default in defaults.items():
        values = default if isinstance(default, list) else [default]
        # The cluster label's name is also an English word in descriptions; checked above.
        for value in values if key != "clusterLabel" else []:
            assert not occurs(literal(value), checked), f"default of {key} ({value!r}) left"
        new = OVERRIDES[key]
        for value in new if isinstance(new, list) else [new]:
            assert literal(value) in checked, f"{key} is not used in any rule"


#: Keys that reach the rules only through computed windows, counts and lists, never as the
#: literal value: each must still change the rendered rules.
DERIVED_KEYS = {
    "probeIntervalSeconds",
    "pushMarginFraction",
    "expectedProbes",
    "expectedPerNodeProbes",
    "perNodeInventory",
    "perNodeTolerations",
    "latencyWindowRuns",
    "etcdFsyncSlowRuns",
    "etcdFsyncOfRuns",
    "storageClassFsyncP99WarningSeconds",
    "storageClassSlowRuns",
    "storageClassOfRuns",
    "intermittentSlowRuns",
    "intermittentOfRuns",
    "outlierRuns",
    "outlierMinSiblings",
    # Its default (3) is another key's override (etcdFsyncSlowRuns): checked as derived.
    "outlierRatio",
    "burstDepletedRuns",
    "regressionMinBaselineFraction",
    "regressionForRuns",
    "failingRuns",
    "staleAfterRuns",
    "lostGroupMemory",
    "etcdRoleMemoryRuns",
    "expectedStreams",
    "continuousObjectiveRatio",
    "continuousBurnRates",
    "expectedEtcdProbes",
    "expectedEtcdStreams",
    "provisionIntervalSeconds",
    "expectedProvisioning",
    "provisionFailingRuns",
    "provisionOfRuns",
    "provisionSlowRuns",
    "provisionSlowOfRuns",
    "provisionStepWarningSeconds",
    "provisionObjectsLeftRuns",
    "provisionStaleAfterRuns",
}


#: What a derived key needs besides itself to take effect: the node inventory is about
#: per-node probes, which the shipped configuration does not deploy.
DERIVED_BASE = {
    "perNodeInventory": {"expectedPerNodeProbes": OVERRIDES["expectedPerNodeProbes"]},
    "perNodeTolerations": {
        "expectedPerNodeProbes": OVERRIDES["expectedPerNodeProbes"],
        "perNodeInventory": True,
    },
}


@pytest.mark.parametrize("key", sorted(DERIVED_KEYS))
def test_derived_keys_change_the_rules(key: str) -> None:
    """A key used only through a computed window still takes effect."""
    base = DERIVED_BASE.get(key, {})
    assert render({**base, key: OVERRIDES[key]}) != render(base)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"latencyWindowRuns": 1}, "latencyWindowRuns = 1: this window would span fewer than two"),
        ({"etcdFsyncSlowRuns": 1}, "etcdFsyncSlowRuns = 1: this window would span fewer than two"),
        ({"probeIntervalSeconds": 43200 * 2}, "regressionBaselineWindow (1d) spans fewer than two"),
        ({"regressionForRuns": 6}, "regressionForRuns (6) must exceed latencyWindowRuns (6)"),
        (
            {"continuousEtcdObjectiveSeconds": 0.015},
            "continuousEtcdObjectiveSeconds = 0.015 is not a bucket boundary",
        ),
        (
            {"storageClassFsyncP99WarningSeconds": {"gp3": 0.03}},
            "storageClassFsyncP99WarningSeconds.gp3 = 0.03 is not a bucket boundary",
        ),
        (
            {
                "continuousBurnRates": [
                    {"long": "1h", "short": "1h", "factor": 2, "severity": "warning"}
                ]
            },
            "continuousBurnRates: the short window (1h) must be shorter than the long one (1h)",
        ),
        (
            {
                "continuousBurnRates": [
                    {"long": "1h", "short": "5m", "factor": 100, "severity": "critical"}
                ]
            },
            "continuousBurnRates: factor 100 times the error budget 0.01 is 1",
        ),
        (
            {"continuousStallSeconds": 90},
            "continuousStallSeconds (90) must be positive and at most",
        ),
        (
            {"lostGroupMemory": "30m"},
            "lostGroupMemory (30m) must be at least twice the stale threshold (17m30s)",
        ),
        (
            {"continuousMissingAfter": "1m"},
            "continuousMissingAfter (1m) must be at least continuousGapTolerance",
        ),
        ({"continuousFailingAfter": "0s"}, "continuousFailingAfter must be positive"),
    ],
)
def test_windows_shorter_than_two_runs_fail_to_render(config: dict[str, Any], message: str) -> None:
    """A window that cannot see two runs makes the rules silently blind: refuse to render."""
    proc = run(
        tool("go-jsonnet"), "-J", ".", "--tla-code", f"config={json.dumps(config)}",
        "alerts/rules.jsonnet", check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "fioprobe mixin config: " + message in proc.stderr, proc.stderr


#: Keys the mixin does not know, each with the start of its message: a misspelt key and the
#: retired ones older docs still name would otherwise be ignored and their defaults used.
UNKNOWN_KEYS = [
    (
        {"latencyWindow": "1m"},
        "latencyWindow: unknown key, did you mean latencyWindowRuns? (expected one of: ",
    ),
    ({"etcdFsyncWarningFor": "0s"}, "etcdFsyncWarningFor: unknown key (expected one of: "),
    (
        {"dashboards": {"refrsh": "1m"}},
        "dashboards.refrsh: unknown key, did you mean refresh? (expected one of: ",
    ),
    (
        {"dashboards": {"uids": {"overveiw": "x"}}},
        "dashboards.uids.overveiw: unknown key, did you mean overview? (expected one of: ",
    ),
    (
        {"storageClassFsyncP99WarningSeconds": {"gp4": 0.016}},
        "storageClassFsyncP99WarningSeconds.gp4: unknown key, did you mean gp2? (expected one "
        "of: gp2, gp3, io1, io2, st1, sc1, ceph-rbd, unknown)",
    ),
]


@pytest.mark.parametrize(("config", "message"), UNKNOWN_KEYS, ids=lambda v: str(v)[:40])
@pytest.mark.parametrize("output", ["rules", "dashboards"])
def test_unknown_keys_stop_the_rendering(config: dict[str, Any], message: str, output: str) -> None:
    """The rules (alerts/rules.jsonnet) and the dashboards alike refuse a key the mixin does
    not have, naming it and the nearest known one."""
    if output == "rules":
        args = ["--tla-code", f"config={json.dumps(config)}", "alerts/rules.jsonnet"]
    else:
        plus = "+" if "dashboards" in config else ""
        value = json.dumps(config).replace('"dashboards":', f'"dashboards"{plus}:')
        code = f"((import 'mixin.libsonnet') + {{ _config+:: {value} }}).grafanaDashboards"
        args = ["-e", code]
    proc = run(tool("go-jsonnet"), "-J", ".", *args, check=False)
    assert proc.returncode != 0
    first = proc.stderr.splitlines()[0]
    assert first.startswith("RUNTIME ERROR: fioprobe mixin config: " + message), proc.stderr


def test_unknown_keys_are_all_named_at_once_and_can_be_let_through() -> None:
    both = {"latencyWindow": "1m", "etcdFsyncWarningFor": "0s"}
    proc = run(
        tool("go-jsonnet"), "-J", ".", "--tla-code", f"config={json.dumps(both)}",
        "alerts/rules.jsonnet", check=False,
    )  # fmt: skip
    assert "etcdFsyncWarningFor: unknown key" in proc.stderr
    assert "; latencyWindow: unknown key, did you mean latencyWindowRuns?" in proc.stderr
    # Where another mixin's keys share the object (mixins merged with `+`), the check is off.
    config = {**both, "refuseUnknownKeys": False}
    assert json.loads(render(config)) == json.loads(render({}))


def test_the_mixin_alone_knows_no_deployment() -> None:
    """Facts flow one way: the mixin's defaults list no probe or stream, so alone it renders no
    `fioprobe.expected` group (FioProbeMissing has nothing to compare with), and its schedule is
    the manifests' default one (everyMinutes), which the manifests pass for what they render."""
    config = default_config()
    for key in (
        "expectedProbes",
        "expectedPerNodeProbes",
        "expectedStreams",
        "expectedEtcdProbes",
        "expectedEtcdStreams",
        "perNodeTolerations",
        "expectedProvisioning",
    ):
        assert config[key] == [], key
    assert config["perNodeInventory"] is False
    groups = [g["name"] for g in yaml.safe_load(RULES.read_text())["groups"]]
    assert "fioprobe.expected" not in groups and "fioprobe.rules" in groups
    manifests = json.loads(
        run(
            tool("go-jsonnet"), "-J", ".", "-e",
            "local m = (import 'manifests/main.libsonnet')(); "
            "{ every: m.config.everyMinutes, mixin: m.mixinConfig }",
        ).stdout
    )  # fmt: skip
    assert config["probeIntervalSeconds"] == manifests["every"] * 60
    # The shipped manifests' facts: their StorageClass probes and one stream per class, the
    # etcd probe and stream on every node with a control-plane role (no node named), and no
    # per-node DaemonSet.
    mixin = manifests["mixin"]
    assert len(mixin["expectedProbes"]) >= 3
    assert not any("node" in p for p in mixin["expectedProbes"] + mixin["expectedStreams"])
    assert mixin["expectedStreams"] == [{"storageclass": "gp2"}, {"storageclass": "gp3"}]
    assert mixin["expectedEtcdProbes"] == [{"storageclass": "etcd-disk", "profile": "etcd-fsync"}]
    assert mixin["expectedEtcdStreams"] == [{"storageclass": "etcd-disk"}]
    assert mixin["etcdNodeRoles"] == ["control-plane", "master"]
    assert mixin["expectedPerNodeProbes"] == []
    assert "per_node" not in EXPECTED.read_text()


def test_no_mixin_jsonnet_imports_the_manifests() -> None:
    """The manifests import the mixin, never the reverse: every jsonnet file of the mixin
    (mixin.libsonnet, config.libsonnet, alerts/, dashboards/, lib/) is scanned for an import
    or importstr of a manifests file."""
    importing = re.compile(r"""import(?:str|bin)?\s*['"]([^'"]+)['"]""")
    mixin = [REPO / "mixin.libsonnet", REPO / "config.libsonnet"]
    for folder in ("alerts", "dashboards", "lib"):
        mixin += (REPO / folder).rglob("*sonnet")
    sources = sorted(set(mixin))
    assert len(sources) >= 10, "the scan found too few mixin files to mean anything"
    for path in sources:
        for target in importing.findall(path.read_text()):
            # jsonnet resolves an import beside the importing file, then in -J . (the root).
            for resolved in ((path.parent / target).resolve(), (REPO / target).resolve()):
                assert not resolved.is_relative_to(REPO / "manifests"), (
                    f"{path.relative_to(REPO)} imports {target}"
                )


def mixin_groups(path_or_text: Path | str) -> list[dict[str, Any]]:
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    return [g for g in yaml.safe_load(text)["groups"] if g["name"] != "fioprobe.expected"]


def test_every_deployment_loads_the_same_mixin_rules() -> None:
    """One set of rendered rules: the manifests' PrometheusRule, a deployment with per-node
    probes and the node inventory, and kube-prometheus' addMixin (the mixin with
    fioprobe.libsonnet's mixinConfig and the node inventory, as example.jsonnet passes them)
    all load exactly alerts/out/rules.yaml's groups, and differ only in `fioprobe.expected`."""
    committed = mixin_groups(RULES)
    manifest = yaml.safe_load(
        (REPO / "manifests" / "generated" / "monitoring-prometheusrule.yaml").read_text()
    )
    assert manifest["spec"]["groups"] == committed
    expected = yaml.safe_load(
        (REPO / "manifests" / "generated" / "monitoring-expectedrule.yaml").read_text()
    )
    # The shipped manifests find etcd nodes by role: their group is that example's.
    shipped = yaml.safe_load(EXPECTED_ETCD_BY_ROLE.read_text())["groups"]
    assert expected["spec"]["groups"] == shipped
    assert mixin_groups(render({}, "example=per-node", "part=mixin")) == committed
    kube_prometheus = run(
        tool("go-jsonnet"), "-J", ".", "-e",
        "local fioprobe = (import 'manifests/kube-prometheus/fioprobe.libsonnet')('monitoring'); "
        "local m = (import 'mixin.libsonnet') + "
        "{ _config+:: fioprobe.mixinConfig { perNodeInventory: true } }; "
        "{ groups: m.prometheusRules.groups + m.prometheusAlerts.groups }",
    ).stdout  # fmt: skip
    assert mixin_groups(kube_prometheus) == committed
    example = (REPO / "manifests" / "kube-prometheus" / "example.jsonnet").read_text()
    assert "fioprobe.mixinConfig {" in example and "perNodeInventory: true" in example


def test_per_node_rules_expect_the_manifests_per_node_probes() -> None:
    """The per-node deployment's group comes from the manifests' per-node configuration: one
    static series per local disk or StorageClass and profile, none with a node, one rule per
    probe putting it on every node that runs per-node probes, and the node inventory in the
    node set only because that deployment switches it on."""
    rules = rules_of(EXPECTED_PER_NODE.read_text())
    records = [r for r in rules if r.get("record") == "probe:fioprobe_expected_per_node:info"]
    assert [(r["labels"]["storageclass"], r["labels"]["profile"]) for r in records] == (
        probe_health_scenarios.PER_NODE
    )
    assert all(r["expr"] == "vector(1)" for r in records)
    on_nodes = [r for r in rules if r.get("record") == "node:fioprobe_expected_per_node:info"]
    assert [(r["labels"]["storageclass"], r["labels"]["profile"]) for r in on_nodes] == (
        probe_health_scenarios.PER_NODE
    )
    assert all(r["expr"].strip() == "node:fioprobe_per_node:info" for r in on_nodes)
    (nodes,) = [r for r in rules if r.get("record") == "node:fioprobe_per_node:info"]
    assert "node:fioprobe_per_node_inventory:info" in nodes["expr"]
    (inventory,) = [r for r in rules if r.get("record") == "node:fioprobe_per_node_inventory:info"]
    assert "kube_node_info" in inventory["expr"]
    # The DaemonSet's tolerations keep its tolerated taint's nodes in the node inventory.
    assert 'key!~"node[.]kubernetes[.]io/.+|fioprobe[.]example[.]com/pool"' in inventory["expr"]
    off = rules_of(render({"perNodeInventory": False}, "example=per-node", "part=expected"))
    (nodes,) = [r for r in off if r.get("record") == "node:fioprobe_per_node:info"]
    assert "kube_node" not in json.dumps(off)


def test_empty_selector_renders_valid_promql(tmp_path: Path) -> None:
    """The selector may be empty (match everything) without producing `{, a="b"}`."""
    text = render({"fioprobeSelector": ""})
    assert "{," not in text and ", }" not in text
    (tmp_path / "rules.yaml").write_text(text)
    run(tool("promtool"), "check", "rules", str(tmp_path / "rules.yaml"))
