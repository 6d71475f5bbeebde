"""promtool unit tests of the mixin's alerts, generated from scenarios of pushed probe runs.

Why generated: the same scenarios must run at several probe schedules (5, 10 and 15 minutes;
tests/mixin/test_mixin_schedules.py renders the rules for each and measures when each alert fires),
and they must look like what Prometheus really scrapes from a Pushgateway, which is too long
to write by hand: one sample every 30 s; each value steps once per probe run (the run pushes
~20 s after its slot starts and the next scrape sees it) and stays flat in between; the
labels prometheus-operator adds to a ServiceMonitor's targets (namespace, service, pod,
endpoint, container) besides the pushed job and instance="" (honorLabels); an optional
cluster label. A Pushgateway restart without persistence drops every series until the
probe's next push, and the new pod comes back with a new `pod` label.

Every test loads the mixin's rules (alerts/out/rules.yaml, the same for every deployment) and
the `fioprobe.expected` group of a deployment (RULE_FILES): the shipped manifests with their
etcd nodes named (alerts/out/expected.yaml, every fact static), or, for the per-node scenarios
(group probe-health-per-node), a deployment with per-node probes and the node inventory
(alerts/out/expected-per-node.yaml), or, for the etcd probes found by role (group
probe-health-etcd-by-role), the shipped manifests as they are
(alerts/out/expected-etcd-by-role.yaml), or, for the provisioning probe's (group provisioning),
a deployment that lists provisioning groups and no probe (alerts/out/expected-provisioning.yaml);
with kube-state-metrics' node series beside the pushed ones (KubeNode) where the scenario has
them.

The parts: scenario_engine.py (probes, runs, what a scrape sees, Scenario -> one promtool
test), scenario_builders.py (the alerts as each rule renders them, helpers the groups share)
and one file of scenarios per alert file (etcd_scenarios.py for alerts/etcd.libsonnet, ...);
this file maps each promtool group to its scenarios and writes them.

`python alerts/tests/scenarios.py [outdir]` writes the committed 5-minute files
(scripts/generate.d/15-alert-tests.sh). Time 0 of every test is the start of run 0; "first
bad run" in docs/MIXIN.md's table is the start of the first slot whose run is bad.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from burst_scenarios import burst_scenarios
from etcd_scenarios import etcd_scenarios, storageclass_scenarios
from outlier_scenarios import outlier_scenarios
from probe_health_scenarios import etcd_by_role_scenarios, health_scenarios, per_node_scenarios
from provisioning_scenarios import DEPLOYMENT_CONFIG as PROVISIONING_CONFIG
from provisioning_scenarios import provisioning_scenarios
from regression_scenarios import regression_scenarios
from scenario_engine import EXPECTED, RULES, SCRAPE_S

GROUPS = {
    "etcd": etcd_scenarios,
    "storageclass-latency": storageclass_scenarios,
    "burst": burst_scenarios,
    "probe-health": health_scenarios,
    "probe-health-per-node": per_node_scenarios,
    "probe-health-etcd-by-role": etcd_by_role_scenarios,
    "latency-regression": regression_scenarios,
    "latency-outlier": outlier_scenarios,
    "provisioning": provisioning_scenarios,
}

#: The deployment each group's scenarios run in: manifests/rules.jsonnet's `example` (its
#: `config` TLA takes _config overrides), and the committed rule files its 5-minute tests load.
DEPLOYMENTS = {
    "named-etcd": [RULES, EXPECTED],
    "per-node": [RULES, "../out/expected-per-node.yaml"],
    "shipped": [RULES, "../out/expected-etcd-by-role.yaml"],
    "provisioning": [RULES, "../out/expected-provisioning.yaml"],
}
RULE_FILES = {
    "probe-health-per-node": "per-node",
    "probe-health-etcd-by-role": "shipped",
    "provisioning": "provisioning",
}
#: A deployment that is not a manifests/rules.jsonnet example of its own: the example it is
#: rendered from and the mixin keys (its `config` TLA) it overrides. The provisioning groups'
#: (alerts/tests/provisioning-deployment.json, which scripts/generate.d/10-mixin.sh renders
#: into alerts/out/expected-provisioning.yaml) lists provisioning groups and no probe, so the
#: probes' rules are the mixin alone's: every probe group that stops is FioProbeStale, and a
#: provisioning group taken for a probe would be one.
VARIANTS = {"provisioning": ("shipped", PROVISIONING_CONFIG)}
#: Renders the mixin's rules and one deployment's group as one rule file.
RULES_JSONNET = "manifests/rules.jsonnet"


def deployment(group: str) -> str:
    """The deployment (a key of DEPLOYMENTS) whose rules `group`'s scenarios run on."""
    return RULE_FILES.get(group, "named-etcd")


def example(group: str) -> str:
    """The manifests/rules.jsonnet example whose rules `group`'s scenarios run on."""
    name = deployment(group)
    return VARIANTS[name][0] if name in VARIANTS else name


def deployment_config(group: str) -> dict[str, Any]:
    """The mixin keys `group`'s deployment overrides (manifests/rules.jsonnet's `config`)."""
    name = deployment(group)
    return dict(VARIANTS[name][1]) if name in VARIANTS else {}


def rule_files(group: str) -> list[str]:
    """The committed rule files (relative to alerts/tests) `group`'s 5-minute tests load."""
    return DEPLOYMENTS[deployment(group)]


#: Recording rules before alerts, as their order in the rule file: at each evaluation the
#: alerts see this evaluation's recorded series. (A real Prometheus evaluates groups
#: independently, so there an alert may see them up to one evaluation interval later.)
GROUP_ORDER = [
    "fioprobe.rules",
    "fioprobe.expected",
    "fioprobe.continuous",
    "fioprobe.continuous.burn",
    "fioprobe-etcd",
    "fioprobe-storageclass-latency",
    "fioprobe-burst",
    "fioprobe-latency-regression",
    "fioprobe-latency-outlier",
    "fioprobe-probe-health",
    "fioprobe-provisioning",
    "fioprobe-continuous",
    "fioprobe-continuous-burn",
]


def document(
    group: str, interval_min: int, rules: str | None = None, memory: bool = True
) -> dict[str, Any]:
    """The promtool test file of `group` at this schedule; `memory=False` leaves out the
    scenarios about the rules' memory (the committed 5-minute files hold them)."""
    return {
        "rule_files": [rules] if rules else rule_files(group),
        "evaluation_interval": "5m" if group == "latency-regression" else f"{SCRAPE_S}s",
        "group_eval_order": GROUP_ORDER,
        "tests": [s.test() for s in GROUPS[group](interval_min) if memory or not s.memory],
    }


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str,
    lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="'" if "{" in v else None),
)


def dump(doc: dict[str, Any], group: str) -> str:
    head = (
        f"# Generated by alerts/tests/scenarios.py ({group}), a 5-minute probe schedule, 30 s\n"
        "# scrapes. Do not edit: change the scenarios and run scripts/generate.sh.\n"
        f"# promtool test rules alerts/tests/{group}.yaml\n"
    )
    return head + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100000)


def main(argv: list[str]) -> None:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    for group in GROUPS:
        (out / f"{group}.yaml").write_text(dump(document(group, 5), group))


if __name__ == "__main__":
    main(sys.argv)
