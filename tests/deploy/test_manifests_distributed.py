"""The Kubernetes objects of a distributed benchmark (manifests/components/distributed.libsonnet).

Rendered with go-jsonnet as every manifest is; checked for what the cluster cannot show on
a single node: the servers spread over nodes by preference (never held Pending for it), each
on its own PVC of the benchmarked class, removed with the StatefulSet unless kept; the client
names every server by its stable name; only the client reaches the servers, which reach
nothing; the plan the client reads is one fioprobe accepts (`--check`, no server contacted);
and the shipped manifests do not include any of it. Not applied to a cluster here: the
e2e scenario is not written (docs/DISTRIBUTED.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, fioprobe, wait_for
from fioprobe.distributed.benchmark import CLEANUP_SECONDS
from fioprobe.distributed.client import STOP_GRACE_SECONDS
from fioprobe.distributed.jobs import PHASE_SLACK_SECONDS
from support.benchmarks import QUALIFY_GP3
from support.fioservers import listening
from support.paths import GO_JSONNET
from support.services import free_port

BENCHMARK = QUALIFY_GP3


def render(
    benchmark: dict[str, Any], part: str = "all", overrides: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-J", str(REPO / "vendor"),
         "--tla-code", f"benchmark={json.dumps(benchmark)}", "--tla-str", f"part={part}",
         "--tla-code", f"overrides={json.dumps(overrides or {})}",
         str(REPO / "manifests" / "distributed.jsonnet")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
    return items


def refusal(benchmark: dict[str, Any]) -> str:
    done = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-J", str(REPO / "vendor"),
         "--tla-code", f"benchmark={json.dumps(benchmark)}",
         str(REPO / "manifests" / "distributed.jsonnet")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    return done.stderr


@pytest.fixture(scope="module")
def objects() -> dict[str, dict[str, Any]]:
    items = render(BENCHMARK)
    found = {f"{o['kind']}/{o['metadata']['name']}": o for o in items}
    assert len(found) == len(items), "two objects of one kind share a name"
    return found


def one(objects: dict[str, dict[str, Any]], kind: str, component: str) -> dict[str, Any]:
    (found,) = [
        o
        for o in objects.values()
        if o["kind"] == kind and o["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    return found


def test_every_object_carries_the_benchmark_instance(objects: dict[str, dict[str, Any]]) -> None:
    """The documented clean-up deletes by this label: every object has it, and the servers'
    PVCs (made from the claim template) too."""
    kinds = sorted(o["kind"] for o in objects.values())
    assert kinds == [
        "ConfigMap",
        "Job",
        "NetworkPolicy",
        "NetworkPolicy",
        "NetworkPolicy",
        "Service",
        "StatefulSet",
    ]
    for obj in objects.values():
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == "qualify-gp3"
        assert obj["metadata"]["namespace"] == "fioprobe"
    servers = one(objects, "StatefulSet", "distributed-server")
    (claim,) = servers["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["labels"]["app.kubernetes.io/instance"] == "qualify-gp3"


def test_servers_one_pvc_each_spread_by_preference(objects: dict[str, dict[str, Any]]) -> None:
    servers = one(objects, "StatefulSet", "distributed-server")
    spec = servers["spec"]
    assert spec["replicas"] == 3
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "gp3"
    assert claim["spec"]["resources"]["requests"]["storage"] == "40Gi"
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Delete",
        "whenScaled": "Delete",
    }
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/worker": ""}
    affinity = pod["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity
    (term,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    labels = spec["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items() and selector == spec["selector"]["matchLabels"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["sh", "-c"]
    assert container["command"][-1] == "ip:0.0.0.0,8765"
    # fio writes the jobs' files in its working directory: the server's own PVC.
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert container["workingDir"] == mounts["data"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False


def test_keep_volumes_retains_the_pvcs() -> None:
    items = render({**BENCHMARK, "keepVolumes": True})
    (servers,) = [o for o in items if o["kind"] == "StatefulSet"]
    assert servers["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }


def test_client_names_every_server_and_runs_once(objects: dict[str, dict[str, Any]]) -> None:
    job = one(objects, "Job", "distributed-client")
    servers = one(objects, "StatefulSet", "distributed-server")
    service = one(objects, "Service", "distributed-server")
    assert service["spec"]["clusterIP"] == "None"
    assert servers["spec"]["serviceName"] == service["metadata"]["name"]
    assert job["spec"]["backoffLimit"] == 0
    (container,) = job["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["fioprobe", "distributed"]
    names = command[command.index("--servers") + 1].split(",")
    base = servers["metadata"]["name"]
    assert names == [
        f"{base}-{i}.{service['metadata']['name']}.fioprobe.svc:8765" for i in range(3)
    ]
    assert command[command.index("--gateway") + 1].startswith("http://fioprobe-pushgateway")


def test_only_the_client_reaches_the_servers(objects: dict[str, dict[str, Any]]) -> None:
    servers = one(objects, "StatefulSet", "distributed-server")
    job = one(objects, "Job", "distributed-client")
    policy = one(objects, "NetworkPolicy", "distributed-server")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == servers["spec"]["selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["egress"] == []
    (rule,) = spec["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # this namespace's pods only, no namespaceSelector
    client_labels = job["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"].items() <= client_labels.items()
    assert rule["ports"] == [{"protocol": "TCP", "port": 8765}]
    # The probes and the servers of another benchmark do not match the client's selector.
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "qualify-gp3"
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == (
        "distributed-client"
    )


def test_the_pushgateway_admits_the_client_only_when_it_pushes(
    objects: dict[str, dict[str, Any]],
) -> None:
    """The Pushgateway's own policy admits probes and Prometheus; the benchmark adds one that
    admits its client (policies add up), and none without `push`."""
    job = one(objects, "Job", "distributed-client")
    client_labels = job["spec"]["template"]["metadata"]["labels"]
    (policy,) = [
        o
        for o in objects.values()
        if o["kind"] == "NetworkPolicy"
        and o["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component")
        == "pushgateway"
    ]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= client_labels.items()
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "qualify-gp3"
    quiet = render({**BENCHMARK, "push": False})
    assert len([o for o in quiet if o["kind"] == "NetworkPolicy"]) == 2
    (quiet_job,) = [o for o in quiet if o["kind"] == "Job"]
    assert "--gateway" not in quiet_job["spec"]["template"]["spec"]["containers"][0]["command"]


def test_the_plan_the_client_reads_is_accepted(
    objects: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    plan = one(objects, "ConfigMap", "distributed-client")["data"]["plan.yaml"]
    (tmp_path / "plan.yaml").write_text(plan)
    job = one(objects, "Job", "distributed-client")
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    servers = command[command.index("--servers") + 1]
    done = fioprobe("distributed", "--plan", str(tmp_path / "plan.yaml"), "--servers", servers,
                    "--check")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert "rw=randread" in done.stdout.decode()
    # The PVC's size reaches the plan: 4 files of 8g do not fit on 32Gi volumes.
    small = render({**BENCHMARK, "volumeSize": "32Gi"})
    (config,) = [o for o in small if o["kind"] == "ConfigMap"]
    (tmp_path / "small.yaml").write_text(config["data"]["plan.yaml"])
    refused = fioprobe("distributed", "--plan", str(tmp_path / "small.yaml"), "--servers",
                       servers, "--check")  # fmt: skip
    assert refused.returncode == 2
    assert "more than a filesystem leaves to files on volume_size (34359738368 bytes" in (
        refused.stderr.decode()
    )


def test_the_client_waits_for_servers_applied_with_it(objects: dict[str, dict[str, Any]]) -> None:
    """Applied at once (the chart, or `part: 'all'`), the client finds its servers starting:
    it waits for them before it sends anything."""
    command = one(objects, "Job", "distributed-client")["spec"]["template"]["spec"]["containers"][
        0
    ]["command"]
    assert command[command.index("--wait-for-servers") + 1] == "300"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"name": "Qualify_gp3"},
            "name Qualify_gp3 must be lowercase letters, digits and -, at most 37",
        ),
        # 38: the StatefulSet's pods would carry a controller-revision-hash label over 63.
        ({"name": "b" * 38}, "must be lowercase letters, digits and -, at most 37"),
        ({"servers": 0}, "servers must be a whole number from 1 to 64"),
        ({"volumeSize": "lots"}, "volumeSize lots is not a quantity such as 40Gi"),
        ({"replicas": 3}, "unknown keys replicas"),
        (
            {"server": 3},
            "unknown keys server (expected name, storageclass, servers, volumeSize, "
            "nodeSelector, keepVolumes, push, plan), did you mean servers?",
        ),
        (
            {"plan": {"servers": 5}},
            "plan must not set servers: name, storageclass, servers, node_selector, "
            "volume_size come from the benchmark",
        ),
        ({"plan": {"volume_size": "1Ti"}}, "plan must not set volume_size"),
    ],
)
def test_bad_benchmarks_stop_the_rendering(change: dict[str, Any], message: str) -> None:
    assert message in refusal({**BENCHMARK, **change})


def test_a_missing_key_is_named_and_a_misspelt_one_is_not_taken_for_it() -> None:
    without = {k: v for k, v in BENCHMARK.items() if k != "servers"}
    assert (
        "distributed: servers is required (every benchmark names name, storageclass, "
        "servers, volumeSize)" in refusal(without)
    )
    misspelt = refusal({**without, "server": 3})
    assert "unknown keys server" in misspelt and "did you mean servers?" in misspelt
    assert "required" not in misspelt


def test_parts_apply_servers_first() -> None:
    servers = {o["kind"] for o in render(BENCHMARK, "servers")}
    assert "Job" not in servers and "StatefulSet" in servers
    assert [o["kind"] for o in render(BENCHMARK, "client")] == ["Job"]


def test_the_shipped_manifests_hold_no_benchmark() -> None:
    """Off by default: nothing of it in the generated manifests."""
    generated = " ".join(p.read_text() for p in (REPO / "manifests" / "generated").glob("*.yaml"))
    assert "distributed-server" not in generated and "distributed-client" not in generated


#: manifests/config.libsonnet's Pushgateway defaults: each attempt's timeout, the attempts.
PUSH_SECONDS = 2 * 10 * 3


def _deadlines(benchmark: dict[str, Any]) -> tuple[int, int, int]:
    """(the Job's activeDeadlineSeconds, its pods' grace, the servers' listening seconds)."""
    items = render(benchmark)
    (job,) = [o for o in items if o["kind"] == "Job"]
    (servers,) = [o for o in items if o["kind"] == "StatefulSet"]
    command = servers["spec"]["template"]["spec"]["containers"][0]["command"]
    grace = job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    return job["spec"]["activeDeadlineSeconds"], grace, int(command[-2])


@pytest.mark.parametrize(
    ("plan", "phase_runs"),
    [
        ({}, 3),
        ({"phases": ["prepare", "randread"]}, 2),
        ({"iodepths": [1, 2, 4, 8]}, 1 + 2 * 4),
        ({"iodepths": [1, 4], "phases": ["randwrite"]}, 2),
    ],
)
def test_the_deadlines_follow_the_phases_stop_cleanup_and_push(
    plan: dict[str, Any], phase_runs: int
) -> None:
    """The client's start and its wait for the servers (300 s) come first; each phase run
    (a sweep runs each random phase per IO depth) gets fio's slack; after
    the Job's deadline its SIGTERM leaves the client the time to stop fio, clean up and
    push; the servers listen until the client cannot need them any more, never longer."""
    benchmark = {**BENCHMARK, "plan": {**BENCHMARK["plan"], **plan}}  # type: ignore[dict-item]
    deadline, grace, server_seconds = _deadlines(benchmark)
    assert grace == STOP_GRACE_SECONDS + CLEANUP_SECONDS + PUSH_SECONDS + 10
    assert deadline == 60 + 300 + 1200 + phase_runs * PHASE_SLACK_SECONDS + grace
    assert server_seconds == 600 + deadline + grace
    quiet = {**benchmark, "push": False}
    assert _deadlines(quiet)[1] == STOP_GRACE_SECONDS + CLEANUP_SECONDS + 10


def test_the_server_stops_listening_at_its_deadline_and_stays_up(tmp_path: Path) -> None:
    """The rendered server command, run here with real fio and a 3-second deadline: fio
    listens, then no longer, while the container's process stays (a StatefulSet restarts
    only what exits); SIGTERM then ends it at once."""
    (servers,) = [o for o in render(BENCHMARK) if o["kind"] == "StatefulSet"]
    command = servers["spec"]["template"]["spec"]["containers"][0]["command"]
    port = free_port()
    process = subprocess.Popen(
        [*command[:-2], "3", f"ip:127.0.0.1,{port}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for(lambda: listening(port), timeout=15, what="fio's server")
        wait_for(lambda: not listening(port), timeout=30, what="the deadline")
        time.sleep(2)
        assert process.poll() is None, "the container's process exited: it would restart"
        assert not listening(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout is not None
        assert b"no longer listening" in process.stdout.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_an_existing_pushgateway_is_reached_by_its_port() -> None:
    """pushgateway.url: the client reaches that port, as the probes do; no policy is added
    for pods of a Pushgateway that is not ours."""
    items = render(BENCHMARK, overrides={"pushgateway": {"url": "https://pgw.example.svc:9443"}})
    assert not [o for o in items if o["metadata"]["name"].endswith("-push")]
    (client,) = [o for o in items if o["metadata"]["name"].endswith("-client")]
    assert client["spec"]["egress"][-1] == {"ports": [{"protocol": "TCP", "port": 9443}]}


def test_the_job_is_never_deleted_behind_the_release(objects: dict[str, dict[str, Any]]) -> None:
    """No ttlSecondsAfterFinished: a Job deleted by a TTL would be created again by the next
    `helm upgrade`, run against servers past their deadline, and push a failure over the
    benchmark's result."""
    assert "ttlSecondsAfterFinished" not in one(objects, "Job", "distributed-client")["spec"]
