"""The provisioning probe as deployed (components/provisioning.libsonnet): its CronJob provisions
a claim and a pod of the cluster's real dynamic provisioner (local-path, which attaches
nothing) every minute (scripts/e2e/config.jsonnet) and pushes each run.

Scenarios, in order: healthy runs with every step timed, adding up to the run's wall time; a
class whose provisioner does not exist, run once from the CronJob's own pod template, failing at
`bound` with `deadline`; the class bound to nodes, run on the cluster's node and on one that does
not exist at once; the provisioner stopped (its Deployment scaled to zero: a stopped
provisioner emits no ProvisioningFailed), where runs fail the same way, a run killed mid-way
(SIGKILL) leaves objects the next run removes while a foreign claim beside them stays,
and FioProbeProvisioningFailing fires; healthy runs again once it is back, nothing left; and the
RBAC, asked with `kubectl auth can-i`: exactly the verbs the probe needs, where it needs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from typing import Any

import pytest
from conftest import (
    NAMESPACE,
    Kube,
    find_alert,
    pod_template,
    pushgateway_groups,
    run_pod,
)
from fioprobe.provision.workload import OWNER_LABEL, RUN_LABEL, SLOT_LABEL, RunSpec, slot_of
from support import procs, provision_api, services

CRONJOB = "fioprobe-provision"
TEST_NAMESPACE = "fioprobe-provision"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:fioprobe-provision"
HEALTHY = "local-path"
NO_PROVISIONER = "e2e-noprovisioner"
PROVISIONER_NAMESPACE = "local-path-storage"
PROVISIONER = "deployment/local-path-provisioner"
# A run every minute (a failing one waits out its 30 s deadline, then deletes its claim), on a
# busy 2-core machine: four minutes sees at least two.
RUNS_WITHIN_SECONDS = 240
# FioProbeProvisioningFailing: two failed runs of the last three (two minutes at a run a minute),
# evaluation and notification; from the first failed run on.
ALERT_WITHIN_SECONDS = 420


def provision_group(url: str, storageclass: str, node: str | None = None) -> dict[str, Any] | None:
    labels = {"job": "fioprobe_provision", "storageclass": storageclass}
    if node is not None:
        labels["node"] = node
    for group in pushgateway_groups(url):
        if group["labels"] == labels:
            return group
    return None


def samples(group: dict[str, Any], metric: str) -> list[tuple[dict[str, str], float]]:
    family = group.get(metric) or {}
    return [(m.get("labels", {}), float(m["value"])) for m in family.get("metrics", [])]


def value(group: dict[str, Any], metric: str) -> float | None:
    found = samples(group, metric)
    return found[0][1] if found else None


def runs(url: str, storageclass: str) -> float:
    group = provision_group(url, storageclass)
    return (value(group, "fioprobe_provision_runs_total") or 0.0) if group else 0.0


def next_run(url: str, storageclass: str, after: float) -> dict[str, Any]:
    """The class's group once it holds a run counted after `after` runs."""

    def counted() -> dict[str, Any] | None:
        group = provision_group(url, storageclass)
        return group if group and runs(url, storageclass) > after else None

    found: dict[str, Any] = services.wait_for(
        counted, RUNS_WITHIN_SECONDS, f"a provisioning run of {storageclass} after run {after:g}", 2
    )
    return found


def failure(group: dict[str, Any]) -> dict[str, str] | None:
    """The last run's failure as {reason, step}, or None (the series also carries the group's
    labels)."""
    found = samples(group, "fioprobe_provision_failure_reason_info")
    return {key: found[0][0][key] for key in ("reason", "step")} if found else None


def probe_objects(kube: Kube) -> list[dict[str, Any]]:
    """The claims and pods the probe made that are still in its namespace."""
    return [
        item
        for kind in ("pvc", "pod")
        for item in kube.json(kind, "-n", TEST_NAMESPACE, "-l", OWNER_LABEL)["items"]
    ]


def test_healthy_runs_push_every_step(pushgateway_url: str, kube: Kube) -> None:
    """local-path binds on the first consumer: created, scheduled, bound, running, written, then
    the deletion's pod_deleted and volume_deleted; no attach (it has no VolumeAttachment). The
    steps add up to the run's wall time, which the probe's log line gives."""
    group = next_run(pushgateway_url, HEALTHY, runs(pushgateway_url, HEALTHY))
    assert value(group, "fioprobe_provision_success") == 1.0, failure(group)
    steps = {labels["step"]: seconds for labels, seconds in
             samples(group, "fioprobe_provision_last_step_duration_seconds")}  # fmt: skip
    assert set(steps) == {
        "created", "scheduled", "bound", "running", "written", "pod_deleted", "volume_deleted",
    }, steps  # fmt: skip
    assert all(seconds >= 0 for seconds in steps.values()), steps
    assert value(group, "fioprobe_provision_objects_left") == 0.0
    info = samples(group, "fioprobe_provision_info")
    assert info and info[0][0]["provisioner"] == "rancher.io/local-path", info
    assert info[0][0]["binding_mode"] == "WaitForFirstConsumer", info
    # The log of a finished Job: "local-path: ok in 12.3s (created 0.1s, ...)".
    wall, logged = logged_run(kube, HEALTHY)
    assert abs(sum(logged.values()) - wall) <= 1.0, (wall, logged)


def logged_run(kube: Kube, storageclass: str) -> tuple[float, dict[str, float]]:
    """The wall time and step durations of the newest logged successful run of the class."""
    pattern = re.compile(rf"^{re.escape(storageclass)}: ok in ([0-9.]+)s \((.*)\)$", re.M)

    def found() -> tuple[float, dict[str, float]] | None:
        for job in sorted(
            kube.json("job", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=provision")[
                "items"
            ],
            key=lambda j: j["metadata"]["creationTimestamp"],
            reverse=True,
        ):
            log = kube("logs", "-n", NAMESPACE, f"job/{job['metadata']['name']}", check=False)
            match = pattern.search(log)
            if match:
                steps = dict(part.rsplit(" ", 1) for part in match.group(2).split(", "))
                return float(match.group(1)), {k: float(v.rstrip("s")) for k, v in steps.items()}
        return None

    result: tuple[float, dict[str, float]] = kube.wait(
        found, RUNS_WITHIN_SECONDS, f"a Job's log line of a successful run of {storageclass}"
    )
    return result


def test_a_class_without_a_provisioner_fails_at_bound(pushgateway_url: str, kube: Kube) -> None:
    """One run of the CronJob's own pod (its account, token, policies and command) for a class
    whose provisioner does not exist: nothing answers the claim, so no event says why; the run
    fails at `bound` past its deadline, deletes its claim and pushes the failure."""
    template = pod_template(kube, NAMESPACE, CRONJOB)
    command = list(template["spec"]["containers"][0]["command"])
    command[command.index("--storageclass") + 1] = NO_PROVISIONER
    command[command.index("bound=30")] = "bound=10"  # scripts/e2e/config.jsonnet's, shorter
    phase, log = run_pod(kube, NAMESPACE, "e2e-provision-nowhere", template, command)
    assert phase == "Failed", log  # exit 1: the run failed, and was pushed
    assert f"{NO_PROVISIONER}: FAILED (deadline in bound)" in log, log
    group = provision_group(pushgateway_url, NO_PROVISIONER)
    assert group is not None
    assert value(group, "fioprobe_provision_success") == 0.0
    assert failure(group) == {"reason": "deadline", "step": "bound"}, failure(group)
    assert value(group, "fioprobe_provision_objects_left") == 0.0


def test_a_class_given_nodes_runs_on_each_of_them(pushgateway_url: str, kube: Kube) -> None:
    """One run of the CronJob's own pod with local-path bound to nodes: the cluster's node and
    one that does not exist, both at once (--max-parallel 2). The real scheduler places the
    first run's pod on its node by node affinity to its name (a WaitForFirstConsumer claim then
    gets that node), and finds no node for the second, whose run fails in `scheduled` with the
    scheduler's own FailedScheduling; each run is pushed to its group (storageclass, node) and
    neither leaves anything behind."""
    (node,) = [item["metadata"]["name"] for item in kube.json("nodes")["items"]]
    missing = "e2e-no-such-node"
    template = pod_template(kube, NAMESPACE, CRONJOB)
    command = [*template["spec"]["containers"][0]["command"],
               "--nodes", f"{HEALTHY}={node},{missing}", "--max-parallel", "2",
               "--deadline", "scheduled=20"]  # fmt: skip
    phase, log = run_pod(kube, NAMESPACE, "e2e-provision-nodes", template, command)
    assert phase == "Failed", log  # exit 1: the run on the missing node failed, and was pushed
    assert re.search(rf"^{HEALTHY} on {node}: ok in ", log, re.M), log
    assert f"{HEALTHY} on {missing}: FAILED (scheduling_failed in scheduled)" in log, log
    for on, success in ((node, 1.0), (missing, 0.0)):
        group = provision_group(pushgateway_url, HEALTHY, on)
        assert group is not None, on
        assert value(group, "fioprobe_provision_success") == success, (on, failure(group))
        assert value(group, "fioprobe_provision_objects_left") == 0.0, on
    assert failure(provision_group(pushgateway_url, HEALTHY, missing) or {}) == {
        "reason": "scheduling_failed", "step": "scheduled"
    }  # fmt: skip
    # Their slots (class and node) are theirs alone: the CronJob's own runs of the class, on the
    # scheduler's node, have another.
    slots = {
        slot_of(RunSpec(CRONJOB, HEALTHY, TEST_NAMESPACE, None, "-", on)) for on in (node, missing)
    }
    left = [o["metadata"]["name"] for o in probe_objects(kube)
            if o["metadata"]["labels"].get(SLOT_LABEL) in slots]  # fmt: skip
    assert left == [], f"the runs on nodes left {left}"


@pytest.fixture
def provisioner_stopped(kube: Kube) -> Any:
    kube("scale", "-n", PROVISIONER_NAMESPACE, PROVISIONER, "--replicas=0")
    try:
        kube.wait(
            lambda: (
                not kube.json(
                    "pod", "-n", PROVISIONER_NAMESPACE, "-l", "app=local-path-provisioner"
                )["items"]
            ),
            120,
            "the local-path provisioner's pod to be gone",
        )
        yield
    finally:
        kube("scale", "-n", PROVISIONER_NAMESPACE, PROVISIONER, "--replicas=1")
        kube(
            "rollout",
            "status",
            "-n",
            PROVISIONER_NAMESPACE,
            PROVISIONER,
            "--timeout=120s",
            timeout=150,
        )


def test_a_stopped_provisioner_fails_runs_until_it_is_back(
    pushgateway_url: str, alertmanager: Any, kube: Kube, provisioner_stopped: None
) -> None:
    # A run that began before the stop may still succeed, or fail deleting a volume that only
    # the provisioner removes; a run that begins after it fails at `bound`.
    first = runs(pushgateway_url, HEALTHY)
    for _ in range(3):
        group = next_run(pushgateway_url, HEALTHY, runs(pushgateway_url, HEALTHY))
        if failure(group) == {"reason": "deadline", "step": "bound"}:
            break
    assert value(group, "fioprobe_provision_success") == 0.0
    assert failure(group) == {"reason": "deadline", "step": "bound"}, (
        failure(group),
        runs(pushgateway_url, HEALTHY) - first,
    )
    # Meanwhile each run waits on its claim for half a minute: one is killed while it waits.
    killed_while_stopped(pushgateway_url, kube)
    services.wait_for(
        lambda: find_alert(alertmanager.url, "FioProbeProvisioningFailing", storageclass=HEALTHY),
        ALERT_WITHIN_SECONDS,
        f"FioProbeProvisioningFailing for {HEALTHY}",
        5,
    )


def test_after_the_provisioner_is_back_runs_succeed_and_nothing_is_left(
    pushgateway_url: str, kube: Kube
) -> None:
    deadline = time.monotonic() + 2 * RUNS_WITHIN_SECONDS
    while True:
        group = next_run(pushgateway_url, HEALTHY, runs(pushgateway_url, HEALTHY))
        if value(group, "fioprobe_provision_success") == 1.0:
            break
        assert time.monotonic() < deadline, (
            f"no successful run since the provisioner is back: {failure(group)}"
        )
    assert value(group, "fioprobe_provision_objects_left") == 0.0
    # Only a run in progress may have objects: all of one run, never an older one's.
    left = {o["metadata"]["labels"][RUN_LABEL] for o in probe_objects(kube)}
    assert len(left) <= 1, left


def removed(url: str) -> float:
    """Objects removed from killed runs, over every provisioning group."""
    return sum(
        value(g, "fioprobe_provision_objects_removed_total") or 0.0
        for g in pushgateway_groups(url)
        if g["labels"].get("job") == "fioprobe_provision"
    )


def kill_provision_processes() -> int:
    """SIGKILL every `fioprobe provision` of the CronJob on this machine (the cluster's one
    node: its containers' processes are this host's), found by their command line in /proc;
    how many."""
    killed = 0
    for pid, argv in procs.command_lines():
        if (
            b"provision" in argv
            and b"--owner" in argv
            and CRONJOB.encode() in argv
            and any(part.endswith(b"fioprobe") for part in argv[:3])
        ):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def killed_while_stopped(pushgateway_url: str, kube: Kube) -> None:
    """A run killed mid-way (SIGKILL: no chance to clean up) leaves its objects; the next run
    of its class removes them and counts them, and a foreign claim beside them stays."""
    foreign = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "e2e-foreign", "namespace": TEST_NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": NO_PROVISIONER,
            "resources": {"requests": {"storage": "1Mi"}},
        },
    }
    kube("apply", "-f", "-", stdin=json.dumps(foreign))
    try:
        # The Job's pod while its run has made its first objects, deleted without grace.
        def in_progress() -> tuple[str, list[str]] | None:
            # Not yet being deleted: a run past its deletion would leave nothing to remove.
            objects = [o for o in probe_objects(kube) if not o["metadata"].get("deletionTimestamp")]
            pods = kube.json("pod", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=provision")[
                "items"
            ]
            running = [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running"]
            if not objects or not running:
                return None
            return objects[0]["metadata"]["labels"][RUN_LABEL], running

        def still_there(run: str) -> bool:
            return any(
                o["metadata"]["labels"][RUN_LABEL] == run
                and not o["metadata"].get("deletionTimestamp")
                for o in probe_objects(kube)
            )

        # The run may reach its own deadline and delete its objects between the look and the
        # kill: then another run is killed (at most three tries, each bounded). Killed, not
        # stopped: a deleted pod's SIGTERM makes the run delete its objects itself (tested on
        # a real API server, tests/provision/test_provision_cmd.py); SIGKILL, as the kubelet
        # sends past the grace period or the kernel's OOM killer does, leaves them.
        for _ in range(3):
            killed_run, _running = kube.wait(in_progress, RUNS_WITHIN_SECONDS, "a run in progress")
            removed_before = removed(pushgateway_url)
            killed = kill_provision_processes()
            if killed and still_there(killed_run):
                break
        else:
            raise AssertionError("every run killed had deleted its objects already")
        # The next run of that class removes them (by the owner label) ...
        kube.wait(
            lambda: (
                not [
                    o
                    for o in probe_objects(kube)
                    if o["metadata"]["labels"][RUN_LABEL] == killed_run
                ]
            ),
            2 * RUNS_WITHIN_SECONDS,
            f"the objects of killed run {killed_run} to be removed",
        )
        # ... and count them once that run has pushed.
        kube.wait(
            lambda: removed(pushgateway_url) > removed_before,
            RUNS_WITHIN_SECONDS,
            "the removal to be counted",
        )
        assert (
            kube.json("pvc", "-n", TEST_NAMESPACE, "e2e-foreign")["metadata"]["name"]
            == "e2e-foreign"
        )
    finally:
        kube("delete", "pvc", "-n", TEST_NAMESPACE, "e2e-foreign", "--wait=false", check=False)


ALLOWED, DENIED = provision_api.rbac_questions(TEST_NAMESPACE, NAMESPACE)


def can_i(kube: Kube, verb: str, resource: str, namespace: str | None) -> str:
    args = provision_api.can_i_args(verb, resource, namespace)
    return kube(*args, "--as", ACCOUNT, check=False).strip()


@pytest.mark.parametrize(("verb", "resource", "namespace"), ALLOWED)
def test_the_probe_may_do_what_a_run_needs(
    kube: Kube, verb: str, resource: str, namespace: str | None
) -> None:
    assert can_i(kube, verb, resource, namespace) == "yes"


@pytest.mark.parametrize(("verb", "resource", "namespace"), DENIED)
def test_the_probe_may_do_nothing_else(
    kube: Kube, verb: str, resource: str, namespace: str | None
) -> None:
    assert can_i(kube, verb, resource, namespace) == "no"


def test_the_test_namespace_holds_no_secret_and_enforces_restricted(kube: Kube) -> None:
    assert kube.json("secret", "-n", TEST_NAMESPACE)["items"] == []
    labels = kube.json("namespace", TEST_NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted", labels
