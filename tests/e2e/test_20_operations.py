"""What happens to a running installation: a Pushgateway scaled to zero and back, `fioprobe gc`
after a profile is removed, and the NetworkPolicies against the real DNS and Pushgateway pods.
(The root-owned etcd probe directory is in test_15_alerts.py: it ends in an alert.)"""

from __future__ import annotations

import json
from typing import Any

import yaml
from conftest import (
    ETCD_NAMESPACE,
    NAMESPACE,
    Kube,
    find_group,
    group_value,
    pod_template,
    pushgateway_groups,
    run_pod,
)
from support import services


def active_jobs(kube: Kube, namespace: str, cronjob: str) -> list[Any]:
    return kube.json("cronjob", "-n", namespace, cronjob).get("status", {}).get("active", [])


def suspend(kube: Kube, namespace: str, cronjob: str, value: bool) -> None:
    kube(
        "patch",
        "cronjob",
        "-n",
        namespace,
        cronjob,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"suspend": value}}),
    )
    if value:
        kube.wait(
            lambda: not active_jobs(kube, namespace, cronjob),
            300,
            f"the running job of {cronjob} to end",
        )


def run_job_from_cronjob(kube: Kube, namespace: str, cronjob: str, name: str) -> str:
    """One run of the CronJob's job template, as `kubectl create job --from` does; its state."""
    kube("create", "job", "-n", namespace, name, f"--from=cronjob/{cronjob}")

    def finished() -> str | None:
        for condition in (
            kube.json("job", "-n", namespace, name).get("status", {}).get("conditions", [])
        ):
            if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
                return condition["type"]
        return None

    return kube.wait(finished, 300, f"job {namespace}/{name} to finish")


def test_pushgateway_scaled_to_zero_and_back_loses_no_run(kube: Kube, pushgateway_url: str) -> None:
    """gp3's schedule is suspended so that only this test's runs happen: one with the
    Pushgateway up (its group then holds the probe's whole state), two while it is scaled to
    zero (their pushes fail; the counts stay in the state on the PVC), one after it is back:
    the cumulative run counter has grown by exactly three since the first."""
    key = {"storageclass": "gp3", "profile": "etcd-fsync"}
    suspend(kube, NAMESPACE, "fioprobe-gp3", True)
    try:
        first = run_job_from_cronjob(kube, NAMESPACE, "fioprobe-gp3", "e2e-outage-before")
        assert first == "Complete"
        before = group_value(find_group(pushgateway_url, **key) or {}, "fioprobe_runs_total")
        assert before is not None and before >= 1
        kube("scale", "deployment", "-n", NAMESPACE, "fioprobe-pushgateway", "--replicas=0")
        kube.wait(
            lambda: (
                not kube.json(
                    "pod", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=pushgateway"
                )["items"]
            ),
            120,
            "the Pushgateway pod to be gone",
        )
        outcomes = [
            run_job_from_cronjob(kube, NAMESPACE, "fioprobe-gp3", f"e2e-outage-{i}")
            for i in range(2)
        ]
        kube("scale", "deployment", "-n", NAMESPACE, "fioprobe-pushgateway", "--replicas=1")
        kube(
            "rollout",
            "status",
            "-n",
            NAMESPACE,
            "deployment/fioprobe-pushgateway",
            "--timeout=180s",
            timeout=200,
        )
        # Ready pod first, then kube-proxy's rules for the new endpoint: refused until then.
        kube.wait(
            lambda: pushgateway_groups(pushgateway_url) is not None,
            120,
            "the Pushgateway API through its Service",
            1,
        )
        after_outcome = run_job_from_cronjob(kube, NAMESPACE, "fioprobe-gp3", "e2e-outage-after")
        group = find_group(pushgateway_url, **key)
        assert group is not None, "the group is gone after the Pushgateway came back"
        after = group_value(group, "fioprobe_runs_total")
        assert after == before + 3, (before, after, outcomes, after_outcome)
        assert outcomes == ["Failed", "Failed"], outcomes
        assert group_value(group, "fioprobe_success") == 1
    finally:
        kube(
            "scale",
            "deployment",
            "-n",
            NAMESPACE,
            "fioprobe-pushgateway",
            "--replicas=1",
            check=False,
        )
        for i in range(2):
            kube(
                "delete",
                "job",
                "-n",
                NAMESPACE,
                f"e2e-outage-{i}",
                "--ignore-not-found",
                check=False,
            )
        kube(
            "delete", "job", "-n", NAMESPACE, "e2e-outage-after", "--ignore-not-found", check=False
        )
        suspend(kube, NAMESPACE, "fioprobe-gp3", False)


def test_gc_after_removing_a_profile_deletes_its_group_only(
    kube: Kube, pushgateway_url: str
) -> None:
    """gp2 drops burst-ceiling from its profiles (what a user does in config.libsonnet); gc
    run in the cluster with the new configuration deletes that one group and nothing else."""
    removed = {"storageclass": "gp2", "profile": "burst-ceiling"}
    services.wait_for(lambda: find_group(pushgateway_url, **removed), 300, f"group {removed}", 2)
    suspend(kube, NAMESPACE, "fioprobe-gp2", True)
    try:
        config_map = kube.json("configmap", "-n", NAMESPACE, "fioprobe-config")
        config = yaml.safe_load(config_map["data"]["gp2.yaml"])
        for target in config["targets"]:
            target["profiles"] = [p for p in target["profiles"] if p != "burst-ceiling"]
        kube(
            "create",
            "configmap",
            "-n",
            NAMESPACE,
            "e2e-gc-config",
            "--from-file",
            "config.yaml=/dev/stdin",
            stdin=yaml.safe_dump(config),
        )
        before = {
            json.dumps(g["labels"], sort_keys=True) for g in pushgateway_groups(pushgateway_url)
        }
        template = pod_template(kube, NAMESPACE, "fioprobe-gp2")
        for volume in template["spec"]["volumes"]:
            if volume["name"] == "config":
                volume["configMap"] = {"name": "e2e-gc-config"}
        phase, log = run_pod(
            kube,
            NAMESPACE,
            "e2e-gc",
            template,
            ["fioprobe", "gc", "--config", "/etc/fioprobe/config.yaml"],
        )
        assert phase == "Succeeded", log
        after = {
            json.dumps(g["labels"], sort_keys=True) for g in pushgateway_groups(pushgateway_url)
        }
        gone = before - after
        assert gone == {json.dumps({"job": "fioprobe", **removed}, sort_keys=True)}, (gone, log)
        assert after <= before
    finally:
        kube(
            "delete",
            "configmap",
            "-n",
            NAMESPACE,
            "e2e-gc-config",
            "--ignore-not-found",
            check=False,
        )
        suspend(kube, NAMESPACE, "fioprobe-gp2", False)


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = (
            expression["key"],
            expression["operator"],
            expression.get("values", []),
        )
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def peer_matches(
    peer: dict[str, Any],
    pod: dict[str, Any],
    namespaces: dict[str, dict[str, str]],
    policy_namespace: str,
) -> bool:
    pod_namespace = pod["metadata"]["namespace"]
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], namespaces[pod_namespace]):
            return False
    elif pod_namespace != policy_namespace:
        return False
    if "podSelector" in peer:
        return selector_matches(peer["podSelector"], pod["metadata"].get("labels", {}))
    return True


def container_ports(pod: dict[str, Any]) -> set[tuple[str, int]]:
    return {
        (p.get("protocol", "TCP"), p["containerPort"])
        for c in pod["spec"]["containers"]
        for p in c.get("ports", [])
    }


def rule_allows(
    rule: dict[str, Any],
    peers_key: str,
    pod: dict[str, Any],
    namespaces: dict[str, dict[str, str]],
    policy_namespace: str,
    port: tuple[str, int] | None,
) -> bool:
    if not any(peer_matches(p, pod, namespaces, policy_namespace) for p in rule.get(peers_key, [])):
        return False
    if port is None or not rule.get("ports"):
        return True
    named = {
        (p.get("protocol", "TCP"), p["name"]): p["containerPort"]
        for c in pod["spec"]["containers"]
        for p in c.get("ports", [])
        if "name" in p
    }
    for allowed in rule["ports"]:
        protocol = allowed.get("protocol", "TCP")
        number = allowed.get("port")
        if isinstance(number, str):
            number = named.get((protocol, number))
        if (protocol, number) == port:
            return True
    return False


def test_network_policies_match_the_real_pods(kube: Kube) -> None:
    """Checked statically: this cluster's CNI (bridge) does not enforce NetworkPolicies. The
    probes' egress rules must select the real CoreDNS pods on their DNS ports and the real
    Pushgateway pod on its port; the Pushgateway's ingress must admit the real probe pods."""
    namespaces = {
        n["metadata"]["name"]: n["metadata"].get("labels", {})
        for n in kube.json("namespace")["items"]
    }
    pods = kube.json("pod", "-A")["items"]
    dns_pods = [
        p
        for p in pods
        if p["metadata"]["namespace"] == "kube-system"
        and p["metadata"].get("labels", {}).get("k8s-app") == "kube-dns"
    ]
    # The manifests' Pushgateway (the Helm release's, in its own namespace, serves its own probes).
    pushgateway_pods = [
        p
        for p in pods
        if p["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "pushgateway"
        and p["metadata"]["namespace"] == NAMESPACE
    ]
    assert dns_pods and pushgateway_pods
    probe_templates = [
        {
            "metadata": {
                **pod_template(kube, c["metadata"]["namespace"], c["metadata"]["name"])["metadata"],
                "namespace": c["metadata"]["namespace"],
            },
            "spec": pod_template(kube, c["metadata"]["namespace"], c["metadata"]["name"])["spec"],
        }
        for c in kube.json("cronjob", "-n", NAMESPACE)["items"]
    ] + [
        # The etcd probes' DaemonSet, whose pods are probes too.
        {
            "metadata": {**d["spec"]["template"]["metadata"], "namespace": ETCD_NAMESPACE},
            "spec": d["spec"]["template"]["spec"],
        }
        for d in kube.json("daemonset", "-n", ETCD_NAMESPACE)["items"]
        if d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "probe"
    ]
    policies = kube.json("networkpolicy", "-A")["items"]
    checked_probe_policies = 0
    for policy in policies:
        ns = policy["metadata"]["namespace"]
        spec = policy["spec"]
        selected = [
            t
            for t in probe_templates
            if t["metadata"]["namespace"] == ns
            and selector_matches(spec["podSelector"], t["metadata"].get("labels", {}))
        ]
        if not selected:
            continue
        checked_probe_policies += 1
        egress = spec.get("egress", [])
        for dns in dns_pods:
            for port in sorted(container_ports(dns)):
                if port[1] != 53:
                    continue
                assert any(rule_allows(r, "to", dns, namespaces, ns, port) for r in egress), (
                    f"{ns}/{policy['metadata']['name']} does not allow {port} to DNS pod "
                    f"{dns['metadata']['name']} {dns['metadata'].get('labels')}"
                )
        for pgw in pushgateway_pods:
            port = sorted(container_ports(pgw))[0]
            assert any(rule_allows(r, "to", pgw, namespaces, ns, port) for r in egress), (
                f"{ns}/{policy['metadata']['name']} does not allow {port} to the Pushgateway"
            )
    # The StorageClass probes', the etcd probes' and the provisioning probe's.
    assert checked_probe_policies == 3, checked_probe_policies
    # The etcd probes read the member list from the API, the provisioning probe its claims and
    # pods: their policies admit the API server's real endpoints (the kubernetes Service's,
    # after kube-proxy's translation) and its Service.
    endpoints = kube.json("endpoints", "-n", "default", "kubernetes")
    api_ports = {p["port"] for subset in endpoints["subsets"] for p in subset["ports"]}
    service_port = kube.json("service", "-n", "default", "kubernetes")["spec"]["ports"][0]["port"]
    for namespace, name in ((ETCD_NAMESPACE, "fioprobe-probes"), (NAMESPACE, "fioprobe-provision")):
        (api_policy,) = [
            p for p in policies
            if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name
        ]  # fmt: skip
        allowed = {
            port["port"]
            for rule in api_policy["spec"]["egress"]
            if "to" not in rule
            for port in rule["ports"]
        }
        assert api_ports | {service_port} <= allowed, (name, api_ports, service_port, allowed)
    for pgw in pushgateway_pods:
        ns = pgw["metadata"]["namespace"]
        ingress = [
            r
            for p in policies
            if p["metadata"]["namespace"] == ns
            and selector_matches(p["spec"]["podSelector"], pgw["metadata"]["labels"])
            for r in p["spec"].get("ingress", [])
        ]
        port = sorted(container_ports(pgw))[0]
        for template in probe_templates:
            # A probe pod as the pod of its CronJob, to test the ingress peers against.
            assert any(rule_allows(r, "from", template, namespaces, ns, port) for r in ingress), (
                f"the Pushgateway does not admit probes of {template['metadata']['namespace']}"
            )
