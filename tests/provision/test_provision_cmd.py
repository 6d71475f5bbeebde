"""`fioprobe provision` end to end: the real command in a subprocess, a real kube-apiserver
(`support.provision_api`: RBAC on, restricted Pod Security, classes whose provisioner does
not exist) and a real Pushgateway; and every refused argument's exact message.

Nothing provisions on this API server, so a class's run fails with `deadline` in the step
that waits on a controller; a short --deadline keeps each run to a few seconds. One API server
and one Pushgateway serve the whole module; each test uses groups of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import fioprobe
from fioprobe.cli.main import main
from fioprobe.provision.workload import CLASS_LABEL
from support import kubeapi, provision_api, services
from support.provision_api import NAMESPACE, OWNER, Cluster

pytestmark = pytest.mark.slow

kube_apiserver = kubeapi.kube_apiserver
JOB = "fioprobe_provision"


@pytest.fixture(scope="module")
def cluster(kube_apiserver: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    return provision_api.prepare(kube_apiserver, tmp_path_factory)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Service]:
    service = services.pushgateway(tmp_path_factory.mktemp("pushgateway")).start()
    yield service
    service.stop()


def _provision(cluster: Cluster, gateway_url: str, state: Path, *args: str) -> tuple[int, str, str]:
    proc = fioprobe(
        "provision", "--namespace", NAMESPACE, "--owner", OWNER, "--image", "fioprobe:test",
        "--gateway", gateway_url, "--state-dir", str(state), *cluster.kube_options(), *args,
        timeout=120,
    )  # fmt: skip
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def _group(gateway: services.Service, **labels: str) -> dict[str, list[dict]] | None:
    """The metrics of one provisioning group, {name: [series]}, or None when absent."""
    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=30) as response:
        groups = json.load(response)["data"]
    for group in groups:
        if group["labels"] == {"job": JOB, **labels}:
            return {name: family["metrics"] for name, family in group.items()
                    if isinstance(family, dict) and "metrics" in family}  # fmt: skip
    return None


def _value(group: dict[str, list[dict]], name: str, **labels: str) -> float:
    (series,) = [s for s in group[name] if labels.items() <= s["labels"].items()]
    return float(series["value"])


def _count(group: dict[str, list[dict]], step: str) -> float:
    (series,) = [s for s in group["fioprobe_provision_step_duration_seconds"]
                 if s["labels"]["step"] == step]  # fmt: skip
    return float(series["count"])


def test_a_class_that_cannot_provision_fails_with_deadline_and_the_next_run_keeps_counting(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    """Two classes in one command: one whose provisioner never comes (failed, exit 1), one
    that keeps its volumes (skipped: its own state, never a failure). Run twice: the
    counters go on from the group's totals."""
    args = ("--storageclass", "nowhere-immediate", "--storageclass", "kept",
            "--deadline", "bound=2")  # fmt: skip
    code, out, err = _provision(cluster, gateway.url, tmp_path / "state", *args)
    assert code == 1, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith("nowhere-immediate: FAILED (deadline in bound) after "), out
    assert lines[0].endswith(": step bound not done after 2s"), out
    assert lines[1] == "kept: skipped (retain_policy)", out
    assert "fioprobe: provision nowhere-immediate: failed in bound: deadline" in err
    assert "Traceback" not in err

    failed = _group(gateway, storageclass="nowhere-immediate")
    assert failed is not None
    assert _value(failed, "fioprobe_provision_success") == 0
    assert _value(failed, "fioprobe_provision_failure_reason_info",
                  reason="deadline", step="bound") == 1  # fmt: skip
    assert _value(failed, "fioprobe_provision_runs_total") == 1
    assert _value(failed, "fioprobe_provision_failures_total") == 1
    assert _count(failed, "created") == 1
    assert {s["labels"]["step"] for s in failed["fioprobe_provision_step_duration_seconds"]} == {
        "created"
    }
    assert _value(failed, "fioprobe_owner_info", owner=OWNER) == 1
    assert _value(failed, "fioprobe_provision_objects_left") == 0
    info = {"provisioner": "example.com/does-not-exist", "volume_type": "unknown",
            "binding_mode": "Immediate"}  # fmt: skip
    assert len(failed["fioprobe_provision_info"]) == 1
    assert _value(failed, "fioprobe_provision_info", **info) == 1

    skipped = _group(gateway, storageclass="kept")
    assert skipped is not None
    assert _value(skipped, "fioprobe_provision_skipped_info", reason="retain_policy") == 1
    assert "fioprobe_provision_success" not in skipped
    assert _value(skipped, "fioprobe_provision_runs_total") == 0
    assert _value(skipped, "fioprobe_provision_info", **info) == 1  # a skip read its class

    # Again, with a state directory of its own (as a new pod would have): read back.
    code, out, err = _provision(cluster, gateway.url, tmp_path / "other-state", *args[:2],
                                "--deadline", "bound=2")  # fmt: skip
    assert code == 1, (out, err)
    again = _group(gateway, storageclass="nowhere-immediate")
    assert again is not None
    assert _value(again, "fioprobe_provision_runs_total") == 2
    assert _value(again, "fioprobe_provision_failures_total") == 2
    assert _count(again, "created") == 2
    # And nothing of the runs is left in the namespace.
    assert not {n for n in cluster.names("pods") | cluster.names("pvc") if "nowhere" in n}


def test_the_class_info_is_what_the_cluster_holds_and_absent_without_a_class(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    """ODF's Ceph RBD driver on the first consumer: `ceph-rbd`, its binding mode; the run
    after the class was deleted pushes no class info at all, only its failure."""
    name = "odf-rbd"
    cluster.kube.apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": name},
                        "provisioner": "openshift-storage.rbd.csi.ceph.com",
                        "parameters": {"clusterID": "openshift-storage"},
                        "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    args = ("--storageclass", name, "--deadline", "scheduled=1")
    code, out, err = _provision(cluster, gateway.url, tmp_path / "state", *args)
    assert code == 1 and out.startswith(f"{name}: FAILED (deadline in scheduled)"), (out, err)
    assert "claim of 1Gi: no size given, the smallest volume of type ceph-rbd" in err
    group = _group(gateway, storageclass=name)
    assert group is not None
    assert len(group["fioprobe_provision_info"]) == 1
    assert _value(group, "fioprobe_provision_info",
                  provisioner="openshift-storage.rbd.csi.ceph.com", volume_type="ceph-rbd",
                  binding_mode="WaitForFirstConsumer") == 1  # fmt: skip

    deleted = cluster.kube.kubectl("delete", "storageclass", name)
    assert deleted.returncode == 0, deleted.stderr
    code, out, err = _provision(cluster, gateway.url, tmp_path / "state", *args)
    assert code == 1 and f'StorageClass "{name}" not found' in out, (out, err)
    group = _group(gateway, storageclass=name)
    assert group is not None
    assert _value(group, "fioprobe_provision_failure_reason_info",
                  reason="provisioning_failed", step="") == 1  # fmt: skip
    assert "fioprobe_provision_info" not in group


def test_an_ephemeral_state_reads_the_group_back_and_leaves_nothing(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    """A CronJob's pod keeps no state between runs: each invocation's private directory (under
    a TMPDIR everyone may write, as a pod's emptyDir) is gone at its end, and the counters go
    on from what the group holds."""
    shared = tmp_path / "tmp"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    for expected in (1, 2):
        proc = fioprobe(
            "provision", "--namespace", NAMESPACE, "--owner", OWNER, "--image", "fioprobe:test",
            "--gateway", gateway.url, "--ephemeral-state", "--storageclass", "nowhere-wait",
            "--deadline", "scheduled=2", *cluster.kube_options(),
            env={"TMPDIR": str(shared)}, timeout=120,
        )  # fmt: skip
        out, err = proc.stdout.decode(), proc.stderr.decode()
        assert proc.returncode == 1, (out, err)
        assert out.startswith("nowhere-wait: FAILED (deadline in scheduled) after "), out
        assert "Traceback" not in err and "state_error" not in err, err
        group = _group(gateway, storageclass="nowhere-wait")
        assert group is not None
        assert _value(group, "fioprobe_provision_runs_total") == expected
        assert list(shared.iterdir()) == []


def test_an_unreachable_pushgateway_exits_4_and_the_next_run_pushes_both(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    nowhere = f"http://127.0.0.1:{services.free_port()}"
    args = ("--storageclass", "nowhere-wait", "--nodes", "nowhere-wait=node-3",
            "--deadline", "scheduled=2")  # fmt: skip
    code, out, err = _provision(cluster, nowhere, state, *args, "--attempts", "1")
    assert code == 4, (out, err)
    assert out.startswith("nowhere-wait on node-3: FAILED (deadline in scheduled) after "), out
    assert "goes with the next push" in err and str(state) in err, err
    assert "Traceback" not in err
    assert _group(gateway, storageclass="nowhere-wait", node="node-3") is None

    code, out, err = _provision(cluster, gateway.url, state, *args)
    assert code == 1, (out, err)
    group = _group(gateway, storageclass="nowhere-wait", node="node-3")
    assert group is not None
    assert _value(group, "fioprobe_provision_runs_total") == 2
    assert _value(group, "fioprobe_provision_failures_total") == 2
    assert _value(group, "fioprobe_provision_failure_reason_info",
                  reason="deadline", step="scheduled") == 1  # fmt: skip


def test_a_class_given_nodes_runs_once_per_node_at_most_max_parallel_at_once(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    """Three nodes, two at a time: each run's pod is required onto its own node (by its name,
    matchFields: a node's hostname label may differ from its name), each run is
    pushed to its own group (storageclass, node), and no more than two runs' pods ever exist
    at once, while two do (the runs overlap). Another class given beside it runs once, alone."""
    name, nodes = "per-node-wait", ("pn-a", "pn-b", "pn-c")
    cluster.kube.apply(provision_api.storage_class(name, "WaitForFirstConsumer"))
    client = cluster.client()
    seen: dict[str, str] = {}  # pod name -> the node its affinity requires
    most = 0
    troubles: list[Exception] = []
    stop = threading.Event()

    def watch_pods() -> None:
        nonlocal most
        deadline = time.monotonic() + 110
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                pods, _ = client.list_objects(f"/api/v1/namespaces/{NAMESPACE}/pods", what="pods")
            except Exception as exc:  # the test fails on it below, not the thread alone
                troubles.append(exc)
                return
            ours = {}
            for pod in pods:
                terms = (pod["spec"].get("affinity", {}).get("nodeAffinity", {})
                         .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                         .get("nodeSelectorTerms", []))  # fmt: skip
                values = [v for t in terms for e in t.get("matchFields", [])
                          if e["key"] == "metadata.name" for v in e["values"]]  # fmt: skip
                if len(values) == 1 and values[0] in nodes:
                    ours[pod["metadata"]["name"]] = values[0]
            seen.update(ours)
            most = max(most, len(ours))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_pods, daemon=True)
    watcher.start()
    try:
        code, out, err = _provision(
            cluster, gateway.url, tmp_path / "state", "--storageclass", name,
            "--storageclass", "nowhere-immediate", "--nodes", f"{name}={','.join(nodes)}",
            "--max-parallel", "2", "--deadline", "scheduled=3", "--deadline", "bound=1",
        )  # fmt: skip
    finally:
        stop.set()
        watcher.join(30)
    assert not troubles, troubles
    assert code == 1, (out, err)
    lines = out.splitlines()
    assert sorted(line.split(":")[0] for line in lines[:3]) == [f"{name} on {n}" for n in nodes]
    assert all(": FAILED (deadline in scheduled) after " in line for line in lines[:3]), out
    assert lines[3].startswith("nowhere-immediate: FAILED (deadline in bound)"), out
    assert "Traceback" not in err
    assert sorted(seen.values()) == list(nodes), seen  # one pod per node, each required there
    assert most == 2, f"at most {most} runs' pods at once (want 2 of 3 with --max-parallel 2)"
    for node in nodes:
        group = _group(gateway, storageclass=name, node=node)
        assert group is not None, node
        assert _value(group, "fioprobe_provision_runs_total") == 1
        assert _value(group, "fioprobe_provision_failure_reason_info",
                      reason="deadline", step="scheduled") == 1  # fmt: skip
    assert _group(gateway, storageclass=name) is None  # no group without a node
    assert not {n for n in cluster.names("pods") | cluster.names("pvc") if "per-node" in n}


def test_a_signal_mid_run_deletes_its_objects_pushes_nothing_and_runs_nothing_more(
    cluster: Cluster, gateway: services.Service, tmp_path: Path
) -> None:
    """SIGTERM (the Job's deadline, a deleted pod) while a run waits: the run asks for its
    claim's and pod's deletion and ends, the next class never starts, nothing is pushed for
    either, the private state directory is gone, and the command says so in one line and exits
    128+15, within the pod's grace period."""
    name = "signalled-wait"
    cluster.kube.apply(provision_api.storage_class(name, "WaitForFirstConsumer"))
    shared = tmp_path / "tmp"
    shared.mkdir()
    client = cluster.client()
    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "provision", "--namespace", NAMESPACE, "--owner",
         OWNER, "--image", "fioprobe:test", "--gateway", gateway.url, "--ephemeral-state",
         "--storageclass", name, "--storageclass", "nowhere-immediate",
         "--deadline", "scheduled=300", *cluster.kube_options()],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(shared)},
    )  # fmt: skip
    try:

        def made() -> set[str] | None:
            """The run's claim and pod once both exist."""
            found = set()
            for resource, kind in (("persistentvolumeclaims", "claim"), ("pods", "pod")):
                items, _ = client.list_objects(
                    f"/api/v1/namespaces/{NAMESPACE}/{resource}", what=f"{kind}s"
                )
                found |= {f"{kind} {i['metadata']['name']}" for i in items
                          if i["metadata"].get("labels", {}).get(CLASS_LABEL) == name}  # fmt: skip
            return found if len(found) == 2 else None

        objects = services.wait_for(made, 60, "the run's claim and pod", 0.2)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = (text.decode() for text in process.communicate(timeout=60))
        ended = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM, (out, err)
    assert ended < 30, f"ended {ended:.1f}s after the signal: past a pod's grace period"
    assert err.splitlines()[-1] == (
        "fioprobe: error: interrupted by SIGTERM; no run started after it; a run stopped while "
        "provisioning deleted its claim and pod and pushed nothing, one stopped while deleting "
        "pushed what it measured"
    ), err
    assert "Traceback" not in err
    (line,) = out.splitlines()  # the next class never ran
    assert line.startswith(f"{name}: interrupted after ") and ", not pushed" in line, out
    assert _group(gateway, storageclass=name) is None
    left = {f"{kind} {n}" for kind, resource in (("claim", "pvc"), ("pod", "pods"))
            for n in cluster.names(resource)}  # fmt: skip
    assert not objects & left, f"still there, not being deleted: {objects & left}"
    assert list(shared.iterdir()) == []


#: Every refused argument and its exact message (after "fioprobe: error: "). The base
#: command is valid but for the argument tested; nothing reaches the API or the gateway.
REFUSED: list[tuple[list[str], str]] = [
    (["--size", "1K"], "provision: --size '1K' is not a Kubernetes quantity of bytes (digits "
     "and a suffix: Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E; e.g. 1Gi)"),
    (["--size", "512Ki"], "provision: --size '512Ki' is not from 1Mi to 64Ti"),
    (["--size", "1.3333Mi"], "provision: --size '1.3333Mi' is not a whole number of bytes"),
    (["--namespace", "Probe_NS"], "provision: --namespace 'Probe_NS' is not a namespace name "
     "(at most 63 characters: lower-case letters, digits and '-', starting and ending with a "
     "letter or digit)"),
    (["--storageclass", "a/b"], "provision: --storageclass 'a/b' must be a StorageClass name: "
     "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, "
     "at most 253 characters"),
    (["--storageclass", "gp3"], "provision: --storageclass names a class twice: give each once"),
    (["--nodes", "gp3"], "provision: --nodes 'gp3' is not CLASS=NODE[,NODE...]"),
    (["--nodes", "gp3="], "provision: --nodes 'gp3=' is not CLASS=NODE[,NODE...]"),
    (["--nodes", "gp2=n1"], "provision: --nodes 'gp2=n1': 'gp2' is not a class given with "
     "--storageclass"),
    (["--nodes", "gp3=n1", "--nodes", "gp3=n2"],
     "provision: --nodes names class gp3 twice: give each once"),
    (["--nodes", "gp3=n1,Node_1"], "provision: --nodes gp3: 'Node_1' must be a node name: "
     "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at "
     "most 253 characters"),
    (["--nodes", "gp3=n1,,n2"], "provision: --nodes gp3: '' must be a node name: lower-case "
     "letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 "
     "characters"),
    (["--nodes", "gp3=n1,n2,n1"], "provision: --nodes gp3: names a node twice: give each once"),
    (["--nodes", "gp3=" + ",".join(f"n{i}" for i in range(1001))],
     "provision: --nodes gp3: 1001 nodes, at most 1000"),
    (["--max-parallel", "0"], "provision: argument --max-parallel: must be a whole number from "
     "1 to 64: '0' (see fioprobe provision --help)"),
    (["--owner", ""], "provision: --owner must not be empty"),
    (["--owner", "x" * 64], f"provision: --owner {'x' * 64!r} is not a Kubernetes label value "
     "(at most 63 characters: letters, digits, '-', '_', '.', starting and ending with a "
     "letter or digit)"),
    (["--image", "my image"], "provision: --image must be an image reference, printable, "
     "without spaces, at most 512 characters: 'my image'"),
    (["--deadline", "bound"], "provision: --deadline 'bound' is not STEP=SECONDS"),
    (["--deadline", "bond=3"], "provision: --deadline 'bond=3': 'bond' is not a step (created, "
     "scheduled, bound, attached, running, written, pod_deleted, detached, volume_deleted)"),
    (["--deadline", "bound=0.5"], "provision: --deadline 'bound=0.5': must be from 1 to 3600 "
     "seconds: '0.5'"),
    (["--deadline", "bound=3", "--deadline", "bound=4"],
     "provision: --deadline names step bound twice"),
    (["--kube-server", "https://127.0.0.1:6443"], "provision: --kube-token-file, --kube-ca-file "
     "missing: outside a pod, give --kube-server, --kube-token-file and --kube-ca-file "
     "together"),
    (["--kube-server", "https://127.0.0.1:6443", "--kube-token-file", "/nonexistent/token",
      "--kube-ca-file", "/nonexistent/ca"],
     "provision: --kube-token-file '/nonexistent/token' is not a readable file"),
    (["--timeout", "0"], "provision: argument --timeout: must be from 0.1 to 600 seconds: '0' "
     "(see fioprobe provision --help)"),
    (["--state-dir", "/tmp/x", "--ephemeral-state"],
     "provision: --state-dir and --ephemeral-state exclude each other"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "message"), REFUSED, ids=[" ".join(e)[:40] for e, _ in REFUSED])
def test_a_refused_argument_says_exactly_why_and_runs_nothing(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    argv = ["provision", "--storageclass", "gp3", "--namespace", "probe", "--image", "img",
            "--gateway", "http://127.0.0.1:9", *extra]  # fmt: skip
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = int(str(exc.code))
    captured = capsys.readouterr()
    assert (code, captured.err, captured.out) == (2, f"fioprobe: error: {message}\n", "")


def test_without_a_gateway_or_outside_a_pod_it_says_what_is_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIOPROBE_PUSHGATEWAY_URL", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    base = ["provision", "--storageclass", "gp3", "--namespace", "probe", "--image", "img"]
    assert main(base) == 2
    assert capsys.readouterr().err == (
        "fioprobe: error: no Pushgateway: give --gateway URL or set FIOPROBE_PUSHGATEWAY_URL\n"
    )
    assert main([*base, "--gateway", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err == (
        "fioprobe: error: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set: not "
        "running in a Kubernetes pod, so the API server cannot be found\n"
    )
