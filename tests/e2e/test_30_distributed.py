"""A distributed benchmark in the cluster: three fio servers of the StatefulSet on the node's
local volumes of class e2e-bench (scripts/e2e/cluster.sh), the client Job applied with them
(it waits for them to listen), the push, and the documented clean-up, PVCs included
(docs/DISTRIBUTED.md, "In a cluster").

The cluster has one node: the servers' preferred anti-affinity must still let all three run
there (spreading itself is checked on the rendered objects,
tests/deploy/test_manifests_distributed.py).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from conftest import NAMESPACE, REPO, Kube, find_group, group_value

NAME = "e2e-bench"
SELECTOR = f"app.kubernetes.io/part-of=fioprobe,app.kubernetes.io/instance={NAME}"
BENCHMARK = {
    "name": NAME,
    "storageclass": "e2e-bench",
    "servers": 3,
    "volumeSize": "1Gi",
    "plan": {
        "jobs_per_server": 1,
        "file_size": "8m",
        "runtime": 2,
        "prepare_runtime": 20,
        "budget": {"bytes_per_server": "256m", "seconds_per_server": 60},
    },
}
#: Pods start once the image is there; generous for a busy machine.
POD_TIMEOUT = 300
JOB_TIMEOUT = 300


def render(run_dir: Path, part: str) -> str:
    """The benchmark's objects with the configuration `make e2e` deployed."""
    overrides = f"(import 'scripts/e2e/config.jsonnet')('{run_dir}')"
    return subprocess.run(
        [str(REPO / ".tools" / "bin" / "go-jsonnet"), "-J", str(REPO), "-J", str(REPO / "vendor"),
         "--tla-code", f"benchmark={json.dumps(BENCHMARK)}", "--tla-code",
         f"overrides={overrides}", "--tla-str", f"part={part}",
         str(REPO / "manifests" / "distributed.jsonnet")],
        capture_output=True, text=True, timeout=120, check=True, cwd=REPO,
    ).stdout  # fmt: skip


def running_servers(kube: Kube) -> list[dict[str, Any]]:
    pods = kube.json("pods", "-n", NAMESPACE, "-l", SELECTOR)["items"]
    return [
        p
        for p in pods
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == "distributed-server"
        and p.get("status", {}).get("phase") == "Running"
    ]


def job_finished(kube: Kube) -> str | None:
    job = kube.json("job", "-n", NAMESPACE, f"fioprobe-bench-{NAME}")
    for condition in job.get("status", {}).get("conditions", []):
        if condition["status"] == "True" and condition["type"] in ("Complete", "Failed"):
            return str(condition["type"])
    return None


def test_benchmark_runs_pushes_and_is_cleaned_up(
    kube: Kube, run_dir: Path, pushgateway_url: str
) -> None:
    # Everything at once, as the Helm chart applies it: the client waits for its servers.
    kube("apply", "-f", "-", stdin=render(run_dir, "all"))
    servers = kube.wait(
        lambda: (lambda pods: pods if len(pods) == 3 else None)(running_servers(kube)),
        POD_TIMEOUT,
        "three running fio servers",
    )
    assert len({p["spec"]["nodeName"] for p in servers}) == 1  # one node: preferred, not required
    outcome = kube.wait(lambda: job_finished(kube), JOB_TIMEOUT, "the benchmark Job to finish")
    log = kube("logs", "-n", NAMESPACE, f"job/fioprobe-bench-{NAME}", timeout=60)
    assert outcome == "Complete", log
    assert "waiting up to 300s for 3 fio servers to listen" in log, log
    assert "all 3 fio servers listening after" in log, log
    for phase in ("prepare", "randread", "randwrite"):
        assert f"phase {phase} (" in log, log
    assert "all servers (fio)" in log and "sum of servers" in log
    assert "clean-up: the benchmark's files removed on 3 servers" in log, log

    group = find_group(pushgateway_url, benchmark=NAME, storageclass="e2e-bench")
    assert group is not None
    assert group_value(group, "fioprobe_distributed_success") == 1.0
    assert group_value(group, "fioprobe_distributed_servers") == 3.0
    # The servers' volumes hold nothing of the benchmark any more.
    for index in range(3):
        volume = run_dir / "pv" / f"bench-{index}"
        assert not [p.name for p in volume.iterdir() if p.name.startswith("bench.")], volume

    # The documented clean-up: every object and the PVCs, by the benchmark's instance label.
    kube(
        "delete", "-n", NAMESPACE, "statefulset,service,job,configmap,networkpolicy,pvc",
        "-l", SELECTOR, "--wait=true", timeout=180,
    )  # fmt: skip
    kube.wait(
        lambda: not kube.json("pods,pvc", "-n", NAMESPACE, "-l", SELECTOR)["items"],
        180,
        "the benchmark's pods and PVCs to be gone",
    )
    request = urllib.request.Request(
        f"{pushgateway_url}/metrics/job/fioprobe/benchmark/{NAME}/storageclass/e2e-bench",
        method="DELETE",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
    assert find_group(pushgateway_url, benchmark=NAME, storageclass="e2e-bench") is None
