"""The Kubernetes API client and the etcd members it reads, against a real kube-apiserver.

The API server (`support.kubeapi`) runs with RBAC on 127.0.0.1. Nodes are created with and
without the control-plane role labels; the probe's service account gets the least privilege
the deployment gives it (a ClusterRole with get and list on nodes, nothing else) and a real
token (`kubectl create token`). The client reads that token and the fixture's CA from files,
as in a pod. Where the API server cannot misbehave on demand (a redirect, a body that is not
JSON, an answer that never comes), a TLS server of the test's own on 127.0.0.1, with a
certificate of the same CA, says exactly what the client receives.

The schedule's side: the members are the union of both role labels; the last list read is
kept on the node and stands in while the API cannot be read; with no list ever read, the
node does not run and says why; a member that joins before a run moves the slot, and the run
waits for the new one.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import gateway_group, gauge
from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import (
    KubeBadAnswer,
    KubeConfigError,
    KubeError,
    KubeNotFound,
    KubeRefused,
    KubeUnreachable,
    KubeUntrusted,
)
from fioprobe.kube.nodes import CONTROL_PLANE_LABELS, nodes_with_any_label
from fioprobe.probe import stagger
from fioprobe.probe.members import MEMBERS_FILE, KnownMembers, LabelledMembers, members_file
from fioprobe.target.config import load_config
from support import kubeapi, services
from support.scripted_tls import ScriptedServer, reply
from support.stagger_target import jobs_dir, write_config

pytestmark = pytest.mark.slow

kube_apiserver = kubeapi.kube_apiserver

NAMESPACE = "fioprobe-etcd"
ACCOUNT = "fioprobe"
CONTROL_PLANE, MASTER = CONTROL_PLANE_LABELS
#: The nodes: three control-plane nodes, one with each role label and one with both, and two
#: that are not (one with a role label of another kind).
NODES = {
    "cp-1": {CONTROL_PLANE: ""},
    "cp-2": {MASTER: ""},
    "cp-3": {CONTROL_PLANE: "", MASTER: "true"},
    "worker-1": {},
    "worker-2": {"node-role.kubernetes.io/worker": ""},
}
#: What the deployment's ClusterRole grants: read the nodes, nothing else.
RULES = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]


@dataclass
class Cluster:
    kube: kubeapi.Kube
    token_file: Path

    def client(self, **options: Any) -> KubeClient:
        return KubeClient(self.kube.url, self.token_file, self.kube.ca_file, **options)


def _node(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


@pytest.fixture(scope="module")
def cluster(kube_apiserver: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    kube = kube_apiserver
    kube.apply([_node(name, labels) for name, labels in NODES.items()])
    kube.apply(
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "fioprobe-etcd-members"}, "rules": RULES},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "fioprobe-etcd-members"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "fioprobe-etcd-members"},
             "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT,
                           "namespace": NAMESPACE}]},
        ]
    )  # fmt: skip
    token_file = kube.token_file(ACCOUNT, NAMESPACE, tmp_path_factory.mktemp("serviceaccount"))
    made = Cluster(kube, token_file)
    client = made.client()

    def granted() -> bool:  # the authorizer learns the binding from a watch: a moment
        try:
            client.list_names("/api/v1/nodes", what="listing nodes")
        except KubeRefused:
            return False
        return True

    services.wait_for(granted, timeout=60, what="the ClusterRoleBinding to take effect")
    return made


# --- the client against the API server ------------------------------------------------------


def test_the_members_are_the_nodes_with_either_role_label(cluster: Cluster) -> None:
    client = cluster.client()
    assert nodes_with_any_label(client, CONTROL_PLANE_LABELS) == ["cp-1", "cp-2", "cp-3"]
    assert nodes_with_any_label(client, [CONTROL_PLANE]) == ["cp-1", "cp-3"]
    assert nodes_with_any_label(client, [MASTER]) == ["cp-2", "cp-3"]
    assert nodes_with_any_label(client, ["node-role.kubernetes.io/etcd"]) == []
    node = client.get("/api/v1/nodes/cp-2", what="reading node cp-2")
    assert node["metadata"]["labels"] == {MASTER: ""}


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/secrets", "secrets"),
        (f"/api/v1/namespaces/{NAMESPACE}/pods", "pods"),
        ("/apis/storage.k8s.io/v1/storageclasses", "storageclasses"),
    ],
)
def test_anything_but_nodes_is_refused_with_the_apis_message(
    cluster: Cluster, path: str, resource: str
) -> None:
    token = cluster.token_file.read_text()
    with pytest.raises(KubeRefused) as refused:
        cluster.client().list_names(path, what=f"listing {resource}")
    message = str(refused.value)
    assert refused.value.status == 403
    assert message.startswith(
        f"listing {resource} (GET {path}?limit=500): {cluster.kube.url} answered HTTP 403 "
        f"Forbidden: {resource}"
    ), message
    assert (
        f'is forbidden: User "system:serviceaccount:{NAMESPACE}:{ACCOUNT}" cannot list '
        f'resource "{resource}"'
    ) in message
    assert message.endswith("(the pod's service account is not allowed to: see its RBAC)")
    assert token not in message and token[-20:] not in message


def test_a_missing_node_is_not_found(cluster: Cluster) -> None:
    with pytest.raises(KubeNotFound) as missing:
        cluster.client().get("/api/v1/nodes/cp-9", what="reading node cp-9")
    assert str(missing.value) == (
        f"reading node cp-9 (GET /api/v1/nodes/cp-9): {cluster.kube.url} answered HTTP 404 "
        'Not Found: nodes "cp-9" not found'
    )


def test_a_token_that_is_not_accepted_is_refused_and_never_shown(
    cluster: Cluster, tmp_path: Path
) -> None:
    forged = "eyJhbGciOiJSUzI1NiJ9.forged-token-payload.signature"
    token_file = tmp_path / "token"
    token_file.write_text(forged + "\n")
    client = KubeClient(cluster.kube.url, token_file, cluster.kube.ca_file)
    with pytest.raises(KubeRefused) as refused:
        client.list_names("/api/v1/nodes", what="listing nodes")
    assert refused.value.status == 401
    assert str(refused.value) == (
        f"listing nodes (GET /api/v1/nodes?limit=500): {cluster.kube.url} answered HTTP 401 "
        f"Unauthorized: Unauthorized (the service account token in {token_file} was not "
        "accepted: expired, or of another cluster)"
    )
    assert "forged" not in str(refused.value)


def test_a_server_signed_by_another_ca_is_not_trusted(cluster: Cluster, tmp_path: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key",
         "-out", "other.crt", "-days", "1", "-subj", "/CN=another-ca"],
        cwd=tmp_path, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    client = KubeClient(cluster.kube.url, cluster.token_file, tmp_path / "other.crt")
    with pytest.raises(KubeUntrusted) as untrusted:
        client.list_names("/api/v1/nodes", what="listing nodes")
    assert str(untrusted.value) == (
        f"listing nodes (GET /api/v1/nodes?limit=500): the TLS certificate of "
        f"{cluster.kube.url} is not trusted (certificate verify failed: unable to get local "
        f"issuer certificate) by the CA file {tmp_path / 'other.crt'}"
    )


def test_unreachable_and_missing_files_say_what_was_asked(cluster: Cluster, tmp_path: Path) -> None:
    port = services.free_port()  # nothing listens there
    closed = KubeClient(f"https://127.0.0.1:{port}", cluster.token_file, cluster.kube.ca_file)
    with pytest.raises(KubeUnreachable) as unreachable:
        closed.get("/api/v1/nodes/cp-1", what="reading node cp-1")
    assert str(unreachable.value) == (
        f"reading node cp-1 (GET /api/v1/nodes/cp-1): cannot reach https://127.0.0.1:{port}: "
        "Connection refused"
    )
    absent = KubeClient(cluster.kube.url, tmp_path / "token", cluster.kube.ca_file)
    with pytest.raises(KubeConfigError) as no_token:
        absent.get("/api/v1/nodes/cp-1", what="reading node cp-1")
    assert str(no_token.value) == (
        "reading node cp-1 (GET /api/v1/nodes/cp-1): the service account token "
        f"{tmp_path / 'token'} cannot be read: No such file or directory"
    )


def test_from_pod_reads_the_pods_environment(tmp_path: Path) -> None:
    pod = KubeClient.from_pod(
        {"KUBERNETES_SERVICE_HOST": "fd00:10:96::1", "KUBERNETES_SERVICE_PORT": "443"},
        directory=tmp_path,
    )
    assert (pod.server, pod.token_file, pod.ca_file) == (
        "https://[fd00:10:96::1]:443", tmp_path / "token", tmp_path / "ca.crt",
    )  # fmt: skip
    assert (
        KubeClient.from_pod(
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
        ).server
        == "https://10.96.0.1:6443"
    )
    with pytest.raises(KubeConfigError) as outside:
        KubeClient.from_pod({})
    assert str(outside.value) == (
        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set: not running in a "
        "Kubernetes pod, so the API server cannot be found"
    )
    for server, problem in (
        ("http://127.0.0.1:6443", "must start with https://"),
        ("https://127.0.0.1:x", "has an invalid port"),
        ("https://u:p@127.0.0.1", "must not hold credentials"),
        ("https://127.0.0.1/api", "must be a base URL"),
    ):
        with pytest.raises(KubeConfigError, match=problem):
            KubeClient(server, tmp_path / "token", tmp_path / "ca.crt")


# --- a TLS server of the test's own ---------------------------------------------------------


def _client(server: ScriptedServer, cluster: Cluster, **options: Any) -> KubeClient:
    return KubeClient(server.url, cluster.token_file, cluster.kube.ca_file, **options)


def test_malformed_json_redirects_and_large_answers_are_refused(cluster: Cluster) -> None:
    answers = {
        b"/api/v1/nodes/broken": reply("200 OK", b'{"kind": "Node", "metadata": {'),
        b"/api/v1/nodes/list": reply("200 OK", b"[1, 2]"),
        b"/api/v1/nodes/moved": reply("302 Found", b"", {"Location": "https://example.org/x"}),
        b"/api/v1/nodes/huge": reply("200 OK", b"x" * 5000),
        b"/api/v1/nodes/busy": reply("503 Service Unavailable", b'{"message": "etcd slow"}'),
    }

    def answer(head: bytes) -> bytes | None:
        return answers.get(head.split(b" ")[1])

    with ScriptedServer(cluster.kube.directory, answer) as server:
        client = _client(server, cluster, max_answer_bytes=4096)
        cases: list[tuple[str, type[KubeError], str]] = [
            ("broken", KubeBadAnswer, "answered something that is not JSON (Expecting "),
            ("list", KubeBadAnswer, "answered JSON that is not an object"),
            ("moved", KubeBadAnswer, "answered HTTP 302 Found (a redirect to "
             "https://example.org/x); the API server does not redirect, refusing to follow"),
            ("huge", KubeBadAnswer, "is larger than 4096 bytes, more than fioprobe reads"),
            ("busy", KubeUnreachable, "answered HTTP 503 Service Unavailable: etcd slow"),
        ]  # fmt: skip
        for name, kind, said in cases:
            with pytest.raises(kind) as failed:
                client.get(f"/api/v1/nodes/{name}", what=f"reading node {name}")
            message = str(failed.value)
            assert message.startswith(f"reading node {name} (GET /api/v1/nodes/{name}): "), message
            assert said in message, message
        assert len(server.heads) == len(cases)  # the redirect was not followed anywhere


def test_the_token_is_read_at_every_request(cluster: Cluster, tmp_path: Path) -> None:
    """Projected tokens rotate: the kubelet rewrites the file, the next request uses it."""
    token_file = tmp_path / "token"
    node = json.dumps({"kind": "Node", "metadata": {"name": "cp-1"}}).encode()
    with ScriptedServer(cluster.kube.directory, lambda _: reply("200 OK", node)) as server:
        client = KubeClient(server.url, token_file, cluster.kube.ca_file)
        for token in ("first.token.value", "second.token.value"):
            token_file.write_text(token)
            assert client.get("/api/v1/nodes/cp-1", what="reading node cp-1")["kind"] == "Node"
        sent = [
            line for head in server.heads for line in head.decode().split("\r\n")
            if line.lower().startswith("authorization:")
        ]  # fmt: skip
        assert sent == [
            "Authorization: Bearer first.token.value",
            "Authorization: Bearer second.token.value",
        ]
        token_file.write_text("two\r\nX-Injected: yes")
        with pytest.raises(KubeConfigError, match="does not hold a bearer token"):
            client.get("/api/v1/nodes/cp-1", what="reading node cp-1")
        assert len(server.heads) == 2


@pytest.mark.parametrize("tls", [True, False], ids=["no-answer", "no-handshake"])
def test_an_answer_that_never_comes_ends_at_the_deadline(cluster: Cluster, tls: bool) -> None:
    with ScriptedServer(cluster.kube.directory, lambda _: None, tls=tls) as server:
        client = _client(server, cluster, timeout_seconds=1.0)
        with pytest.raises(KubeUnreachable) as silent:
            client.list_names("/api/v1/nodes", what="listing nodes")
    assert str(silent.value) == (
        f"listing nodes (GET /api/v1/nodes?limit=500): no complete answer from {server.url} "
        "within 1s"
    )


# --- the members, kept on the node ----------------------------------------------------------


def _members(tmp_path: Path, client: KubeClient) -> LabelledMembers:
    config = load_config(write_config(tmp_path, "http://127.0.0.1:9", "cp-1"), jobs_dir(tmp_path))
    return LabelledMembers(client, CONTROL_PLANE_LABELS, members_file(config))


def test_the_last_list_read_stands_in_while_the_api_cannot_be_read(
    cluster: Cluster, tmp_path: Path
) -> None:
    live = _members(tmp_path, cluster.client())
    assert live.file.path == tmp_path / "state" / "cp-1" / MEMBERS_FILE
    read = live.read()
    assert (read.names, read.note) == (("cp-1", "cp-2", "cp-3"), None)
    assert live.file.path.stat().st_mode & 0o777 == 0o600
    kept = KnownMembers.from_json(json.loads(live.file.path.read_text()), "kept")
    assert (kept.labels, kept.names) == (tuple(sorted(CONTROL_PLANE_LABELS)), read.names)
    written = live.file.path.stat().st_mtime_ns
    live.read()  # the same list: the file is not written again (no fsync on etcd's disk)
    assert live.file.path.stat().st_mtime_ns == written

    port = services.free_port()
    down = KubeClient(f"https://127.0.0.1:{port}", cluster.token_file, cluster.kube.ca_file)
    restarted = LabelledMembers(down, CONTROL_PLANE_LABELS, live.file)  # a new pod, same node
    stood_in = restarted.read()
    assert stood_in.names == ("cp-1", "cp-2", "cp-3")
    assert stood_in.note is not None
    assert stood_in.note.startswith(
        "cannot read the members from the Kubernetes API (listing the nodes labelled "
    ), stood_in.note
    assert f"cannot reach https://127.0.0.1:{port}: Connection refused); using the list read " \
        "at " in stood_in.note  # fmt: skip
    assert stood_in.note.endswith(": cp-1, cp-2, cp-3")

    # A kept file the probe did not write is not used: writable by others, or a symlink.
    live.file.path.chmod(0o644 | 0o002)
    refused = LabelledMembers(down, CONTROL_PLANE_LABELS, live.file).read()
    assert refused.names is None and refused.note is not None
    assert "is writable by everyone; fioprobe did not write it and never trusts it" in refused.note
    assert refused.note.endswith(": not running")


def test_with_no_list_ever_read_the_node_does_not_run(cluster: Cluster, tmp_path: Path) -> None:
    port = services.free_port()
    down = KubeClient(f"https://127.0.0.1:{port}", cluster.token_file, cluster.kube.ca_file)
    members = _members(tmp_path, down)
    nothing = members.read()
    assert nothing.names is None
    assert nothing.note == (
        "cannot read the members from the Kubernetes API (listing the nodes labelled "
        f"{CONTROL_PLANE} (GET /api/v1/nodes?labelSelector=node-role.kubernetes.io%2F"
        f"control-plane&limit=500): cannot reach https://127.0.0.1:{port}: Connection "
        f"refused), and no member list was read before (none kept in {members.file.path}): "
        "not running"
    )


def test_the_read_right_before_a_run_takes_two_seconds_at_most(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The plan's read is answered; the read right before the run finds the API hanging (as
    etcd's slow disk makes it): after its 2 s (1 s per label) the plan's list stands in."""
    answered: list[int] = []
    page = {"kind": "PartialObjectMetadataList", "metadata": {},
            "items": [{"metadata": {"name": "cp-1"}}]}  # fmt: skip

    def answer(_: bytes) -> bytes | None:
        answered.append(1)
        return reply("200 OK", json.dumps(page).encode()) if len(answered) <= 2 else None

    with ScriptedServer(cluster.kube.directory, answer) as server:
        members = _members(tmp_path, _client(server, cluster))
        assert members.read().names == ("cp-1",)
        late = members.read(quick=True)
    assert late.names == ("cp-1",)
    assert late.note is not None and late.note.startswith(
        "cannot read the members from the Kubernetes API (listing the nodes labelled "
        f"{CONTROL_PLANE} (GET /api/v1/nodes?labelSelector=node-role.kubernetes.io%2F"
        f"control-plane&limit=500): no complete answer from {server.url} within 1s); using "
        "the list read at "
    ), late.note
    assert len(answered) == 3  # the second label was not asked: one failed list is enough


# --- the loop, in a process of its own --------------------------------------------------------

#: `fioprobe run --every --members-label` as its loop runs in a pod, with the API server's
#: address, token and CA given as files instead of the pod's (`KubeClient.from_pod`).
DRIVER = """
import json, sys
from pathlib import Path
from fioprobe.kube.client import KubeClient
from fioprobe.probe import members as kept, schedule
from fioprobe.target.config import load_config

a = json.loads(sys.argv[1])
jobs = Path(a["jobs"])
config = load_config(Path(a["config"]), jobs)
client = KubeClient(a["server"], Path(a["token"]), Path(a["ca"]))
members = kept.LabelledMembers(client, a["labels"], kept.members_file(config))
sys.exit(schedule.run_staggered(config, a["every"], members, node=a["node"], jobs_dir=jobs,
                                quiet=False, cycles=a.get("cycles", 1)))
"""


def _loop(
    tmp_path: Path, gateway: str, server: str, cluster: Cluster, node: str, every: float
) -> subprocess.Popen[str]:
    args = {
        "jobs": str(jobs_dir(tmp_path)),
        "config": str(write_config(tmp_path, gateway, node)),
        "server": server,
        "token": str(cluster.token_file),
        "ca": str(cluster.kube.ca_file),
        "labels": list(CONTROL_PLANE_LABELS),
        "node": node,
        "every": every,
    }
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _pushed_start(gateway: services.Service, node: str) -> float:
    """When the node's pushed run started: its push (stamped by the Pushgateway) less
    fioprobe_duration_seconds, which runs from the start to the push."""
    group = gateway_group(gateway, storageclass="etcd", profile="slot-fsync", node=node)
    assert group is not None, node
    assert gauge(group, "fioprobe_success") == 1
    assert gauge(group, "fioprobe_runs_total") == 1
    return gauge(group, "push_time_seconds") - gauge(group, "fioprobe_duration_seconds")


def test_the_loop_without_a_list_does_not_run_with_the_kept_list_it_does(
    cluster: Cluster, tmp_path: Path, pushgateway: services.Service
) -> None:
    down = f"https://127.0.0.1:{services.free_port()}"
    loop = _loop(tmp_path, pushgateway.url, down, cluster, "cp-1", 30)
    _, said = loop.communicate(timeout=120)
    assert loop.returncode == 2, said
    lines = said.splitlines()
    assert len(lines) == 1 and lines[0].endswith(": not running"), said
    assert (
        gateway_group(pushgateway, storageclass="etcd", profile="slot-fsync", node="cp-1") is None
    )

    config = load_config(tmp_path / "cp-1.yaml", jobs_dir(tmp_path))
    members_file(config).write(KnownMembers(
        tuple(sorted(CONTROL_PLANE_LABELS)), ("cp-1",), time.time() - 3600).to_json()
    )  # fmt: skip
    loop = _loop(tmp_path, pushgateway.url, down, cluster, "cp-1", 30)
    _, said = loop.communicate(timeout=180)
    assert loop.returncode == 0, said
    assert "; using the list read at " in said and "node cp-1 is etcd member 1 of 1" in said
    start = _pushed_start(pushgateway, "cp-1")
    slot = stagger.slot_of(30, math.floor(start / 30), ["cp-1"], "cp-1")
    assert slot is not None and slot.start <= start < slot.end


def test_a_member_that_joins_before_the_run_moves_its_slot(
    cluster: Cluster, tmp_path: Path, pushgateway: services.Service
) -> None:
    """cp-x plans its run as the only member with a node label of its own (etcd-x); before
    its slot starts, cp-a gets the label too and takes the first half of every interval:
    cp-x does not run at the interval's start, nor later in that interval (cp-a may have
    started there on the old list), but in the second half of the next one."""
    label = "example.com/etcd-x"
    kube = cluster.kube
    kube.apply(_node("cp-x", {label: ""}))
    every = 60.0
    # Leave at least 20 s between the plan and the slot's start for the label to change.
    if math.ceil(time.time() / every) * every - time.time() < 20:
        time.sleep(math.ceil(time.time() / every) * every - time.time() + 0.5)
    planned_interval = math.ceil(time.time() / every)  # the slot of cp-x alone starts it
    args = {
        "jobs": str(jobs_dir(tmp_path)),
        "config": str(write_config(tmp_path, pushgateway.url, "cp-x")),
        "server": kube.url, "token": str(cluster.token_file), "ca": str(kube.ca_file),
        "labels": [label], "node": "cp-x", "every": every, "cycles": 2,
    }  # fmt: skip
    loop = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert loop.stderr is not None
        planned = loop.stderr.readline()
        assert "node cp-x is etcd member 1 of 1 (cp-x)" in planned, planned
        kube.apply(_node("cp-a", {label: ""}))
        _, rest = loop.communicate(timeout=240)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait(10)
    said = planned + rest
    assert loop.returncode == 0, said
    assert "the members changed before the run: cp-a, cp-x; waiting for this node's new " \
        "slot" in said, said  # fmt: skip
    assert "node cp-x is etcd member 2 of 2 (cp-a, cp-x)" in said, said
    start = _pushed_start(pushgateway, "cp-x")
    slot = stagger.slot_of(every, math.floor(start / every), ["cp-a", "cp-x"], "cp-x")
    assert slot is not None and slot.index == 1 and slot.start <= start < slot.end
    assert slot.interval == planned_interval + 1
