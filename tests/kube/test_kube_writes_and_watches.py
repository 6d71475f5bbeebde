"""The Kubernetes API client's create, delete, whole-object list and watch, against a real
kube-apiserver (`support.kubeapi`, RBAC on) with a service account allowed exactly what the
provisioning probe is: create, get, list, watch and delete claims in one namespace, list and
watch its events.

What the real server cannot do on demand (a watch line that is not JSON or too long, a watch
that never ends) a scripted TLS server on 127.0.0.1 does (`support.scripted_tls`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fioprobe.kube.client import KubeClient
from fioprobe.kube.errors import (
    KubeBadAnswer,
    KubeConflict,
    KubeInvalid,
    KubeNotFound,
    KubeRefused,
    KubeUnreachable,
)
from fioprobe.kube.watch import Delivery, Watch
from fioprobe.provision.reasons import Reason, api_error_signal
from support import kubeapi, services
from support.scripted_tls import Held, ScriptedServer

pytestmark = pytest.mark.slow

kube_apiserver = kubeapi.kube_apiserver

NAMESPACE = "fioprobe-provision"
QUOTA_NAMESPACE = "fioprobe-quota"
ACCOUNT = "fioprobe-provision"
CLAIMS = f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"
RULES = [
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
]  # fmt: skip
LABEL = "fioprobe.io/provision-test"


@dataclass
class Account:
    kube: kubeapi.Kube
    token_file: Path

    def client(self, **options: Any) -> KubeClient:
        return KubeClient(self.kube.url, self.token_file, self.kube.ca_file, **options)


def _role_in(namespace: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": ACCOUNT, "namespace": namespace}, "rules": RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": ACCOUNT, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
         "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}]},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def account(kube_apiserver: kubeapi.Kube, tmp_path_factory: pytest.TempPathFactory) -> Account:
    kube = kube_apiserver
    kube.apply(_role_in(NAMESPACE))
    kube.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}
    )  # fmt: skip
    kube.apply(_role_in(QUOTA_NAMESPACE))
    token_file = kube.token_file(ACCOUNT, NAMESPACE, tmp_path_factory.mktemp("serviceaccount"))
    made = Account(kube, token_file)
    client = made.client()

    def granted() -> bool:  # the authorizer learns the binding from a watch: a moment
        try:
            client.list_objects(CLAIMS, what="listing claims")
            client.list_objects(
                f"/api/v1/namespaces/{QUOTA_NAMESPACE}/persistentvolumeclaims", what="listing"
            )
        except KubeRefused:
            return False
        return True

    services.wait_for(granted, timeout=60, what="the RoleBindings to take effect")
    return made


def _claim(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels or {LABEL: "yes"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "nowhere",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


# --- create and delete ----------------------------------------------------------------------


def test_create_answers_the_stored_object_and_a_second_is_a_conflict(account: Account) -> None:
    client = account.client()
    made = client.create(CLAIMS, _claim("c-create"), what="creating claim c-create")
    assert made["metadata"]["name"] == "c-create"
    assert made["metadata"]["uid"] and made["metadata"]["resourceVersion"]
    assert made["status"]["phase"] == "Pending"
    with pytest.raises(KubeConflict) as again:
        client.create(CLAIMS, _claim("c-create"), what="creating claim c-create")
    assert again.value.status == 409
    assert again.value.answer is not None and again.value.answer["reason"] == "AlreadyExists"
    assert str(again.value) == (
        f"creating claim c-create (POST {CLAIMS}): {account.kube.url} answered HTTP 409 "
        'Conflict: persistentvolumeclaims "c-create" already exists'
    )


def test_delete_with_the_uid_deletes_only_that_object(account: Account) -> None:
    client = account.client()
    made = client.create(CLAIMS, _claim("c-delete"), what="creating claim c-delete")
    path = f"{CLAIMS}/c-delete"
    with pytest.raises(KubeConflict) as other:
        client.delete(path, what="deleting claim c-delete", uid="not-its-uid")
    assert other.value.status == 409
    assert "the UID in the precondition (not-its-uid) does not match the UID in record" in str(
        other.value
    )
    assert (
        client.get(path, what="reading claim c-delete")["metadata"]["uid"]
        == (made["metadata"]["uid"])
    )
    client.delete(path, what="deleting claim c-delete", uid=made["metadata"]["uid"])

    def gone() -> bool:  # the claim's pvc-protection finalizer is the controllers' to remove
        try:
            got = client.get(path, what="reading claim c-delete")
        except KubeNotFound:
            return True
        return bool(got["metadata"].get("deletionTimestamp"))

    services.wait_for(gone, timeout=30, what="the claim to be deleted")


def test_a_missing_object_is_not_found_for_delete(account: Account) -> None:
    with pytest.raises(KubeNotFound) as missing:
        account.client().delete(f"{CLAIMS}/c-none", what="deleting claim c-none")
    assert missing.value.status == 404
    assert str(missing.value) == (
        f"deleting claim c-none (DELETE {CLAIMS}/c-none): {account.kube.url} answered HTTP "
        '404 Not Found: persistentvolumeclaims "c-none" not found'
    )


def test_refusals_keep_the_apis_status_for_the_failure_reason(account: Account) -> None:
    """RBAC, an invalid object and an exceeded quota: each a KubeError with the HTTP status
    and the API's Status object, from which the provisioning probe names its reason."""
    client = account.client()
    with pytest.raises(KubeRefused) as forbidden:
        client.create(
            "/api/v1/namespaces/default/persistentvolumeclaims", _claim("c-x"), what="creating"
        )
    assert forbidden.value.status == 403
    assert api_error_signal(forbidden.value.status, forbidden.value.answer).reason is (
        Reason.FORBIDDEN
    )
    invalid = _claim("c-invalid")
    invalid["spec"]["accessModes"] = ["NoSuchMode"]
    with pytest.raises(KubeInvalid) as refused:
        client.create(CLAIMS, invalid, what="creating claim c-invalid")
    assert refused.value.status == 422
    assert 'Unsupported value: "NoSuchMode"' in str(refused.value)
    assert api_error_signal(refused.value.status, refused.value.answer).reason is Reason.INVALID
    # A quota of no claims at all, its usage as the quota controller would have written it
    # (this API server runs no controllers).
    kube = account.kube
    kube.apply(
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "no-claims", "namespace": QUOTA_NAMESPACE},
         "spec": {"hard": {"persistentvolumeclaims": "0"}}}
    )  # fmt: skip
    status = kube.kubectl(
        "patch", "resourcequota", "no-claims", "-n", QUOTA_NAMESPACE, "--subresource=status",
        "--type=merge", "-p",
        json.dumps({"status": {"hard": {"persistentvolumeclaims": "0"},
                               "used": {"persistentvolumeclaims": "0"}}}),
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    quota_claims = f"/api/v1/namespaces/{QUOTA_NAMESPACE}/persistentvolumeclaims"
    with pytest.raises(KubeRefused) as quota:
        client.create(quota_claims, _claim("c-quota"), what="creating claim c-quota")
    assert quota.value.status == 403
    assert "exceeded quota: no-claims" in str(quota.value)
    signal = api_error_signal(quota.value.status, quota.value.answer)
    assert signal.reason is Reason.QUOTA_EXCEEDED
    assert signal.message.startswith('persistentvolumeclaims "c-quota" is forbidden: exceeded')


# --- lists and watches ----------------------------------------------------------------------


class Collector:
    """A watch read in a thread of its own, as the probe reads several at once."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.deliveries: list[Delivery] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.watch.close()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the watch did not end on close"

    def _read(self) -> None:
        try:
            self.deliveries.extend(self.watch.deliveries())
        except BaseException as exc:  # handed to the test's thread
            self.error = exc

    def ended(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def of(self, name: str) -> list[str]:
        return [
            d.event["type"] for d in self.deliveries
            if d.event["object"].get("metadata", {}).get("name") == name
        ]  # fmt: skip


def test_a_watch_from_the_lists_version_delivers_each_change_once_in_order(
    account: Account,
) -> None:
    client = account.client()
    kube = account.kube
    _, version = client.list_objects(CLAIMS, what="listing claims", label_selector=LABEL)
    assert version
    watch = Watch(client, CLAIMS, what="watching claims", resource_version=version,
                  label_selector=f"{LABEL}=yes")  # fmt: skip
    with Collector(watch) as seen:
        before = time.monotonic()
        made = client.create(CLAIMS, _claim("c-watch"), what="creating claim c-watch")
        client.create(CLAIMS, _claim("c-foreign", {"other": "yes"}), what="creating c-foreign")
        labelled = kube.kubectl("label", "pvc", "c-watch", "-n", NAMESPACE, "step=two")
        assert labelled.returncode == 0, labelled.stderr
        client.delete(f"{CLAIMS}/c-watch", what="deleting", uid=made["metadata"]["uid"])
        services.wait_for(lambda: "MODIFIED" in seen.of("c-watch")[1:], timeout=30,
                          what="the label's change to be delivered")  # fmt: skip
        assert seen.error is None, seen.error
    kinds = seen.of("c-watch")
    assert kinds[0] == "ADDED" and set(kinds[1:]) == {"MODIFIED"}, kinds
    assert seen.of("c-foreign") == []
    times = [d.at for d in seen.deliveries]
    assert times == sorted(times) and before <= times[0]
    assert watch.resource_version != version  # the next watch starts after these


def test_the_server_ends_a_watch_at_its_timeout_and_the_next_starts_where_it_ended(
    account: Account,
) -> None:
    client = account.client()
    _, version = client.list_objects(CLAIMS, what="listing claims")
    watch = Watch(client, CLAIMS, what="watching claims", resource_version=version, seconds=1)
    with Collector(watch) as first:
        assert first.ended(30), "the API server did not end the watch at timeoutSeconds"
    assert first.error is None, first.error
    made = client.create(CLAIMS, _claim("c-after"), what="creating claim c-after")
    following = Watch(client, CLAIMS, what="watching claims",
                      resource_version=watch.resource_version)  # fmt: skip
    with Collector(following) as second:
        services.wait_for(lambda: second.of("c-after"), timeout=30, what="c-after's event")
    assert second.of("c-after")[0] == "ADDED"
    assert made["metadata"]["name"] == "c-after"


def test_close_ends_a_quiet_watch_at_once(account: Account) -> None:
    client = account.client()
    _, version = client.list_objects(CLAIMS, what="listing claims")
    watch = Watch(client, CLAIMS, what="watching claims", resource_version=version,
                  label_selector="nothing=matches")  # fmt: skip
    with Collector(watch) as quiet:
        time.sleep(1)
        started = time.monotonic()
        watch.close()
        assert quiet.ended(5)
        assert time.monotonic() - started < 5
    assert quiet.error is None and quiet.deliveries == []


def test_a_watch_refused_by_rbac_says_so(account: Account) -> None:
    watch = Watch(account.client(), "/api/v1/namespaces/default/pods", what="watching pods",
                  resource_version="")  # fmt: skip
    with pytest.raises(KubeRefused) as refused:
        list(watch.deliveries())
    assert refused.value.status == 403
    assert str(refused.value).startswith("watching pods (GET /api/v1/namespaces/default/pods?")


# --- watches the real server would never send -----------------------------------------------


def _stream_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"


def _event(name: str) -> bytes:
    return (
        json.dumps(
            {
                "type": "ADDED",
                "object": {
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": name, "resourceVersion": "7"},
                },
            }
        ).encode()
        + b"\n"
    )


@pytest.fixture
def scripted(account: Account) -> Iterator[tuple[ScriptedServer, list[bytes | Held]]]:
    answers: list[bytes | Held] = []
    with ScriptedServer(account.kube.directory, lambda _: answers.pop(0)) as server:
        yield server, answers


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        (b'{"type": "ADDED", "object": {', "an event that is not JSON"),
        (b'{"type": "SOMETHING", "object": {}}\n', "an event that is not a watch event"),
        (b'{"type": "ADDED", "object": "x"}\n', "an event that is not a watch event"),
        (b'{"type": "ADDED", "object": {"k": "' + b"x" * 5000 + b'"}}\n',
         "sent a line longer than 4096 bytes"),
    ],
    ids=["not-json", "not-an-event", "object-not-an-object", "too-long"],
)  # fmt: skip
def test_a_watch_line_that_is_not_an_event_is_refused_after_the_good_ones(
    account: Account, scripted: tuple[ScriptedServer, list[bytes | Held]], sent: bytes, said: str
) -> None:
    server, answers = scripted
    answers.append(_stream_head() + _event("c-1") + sent)
    client = KubeClient(server.url, account.token_file, account.kube.ca_file)
    watch = Watch(client, CLAIMS, what="watching claims", resource_version="5", line_bytes=4096)
    seen: list[Delivery] = []
    with pytest.raises(KubeBadAnswer) as bad:
        for delivery in watch.deliveries():
            seen.append(delivery)
    assert [d.event["object"]["metadata"]["name"] for d in seen] == ["c-1"]
    assert watch.resource_version == "7"
    assert said in str(bad.value)
    head = server.heads[0].decode()
    assert head.startswith(
        f"GET {CLAIMS}?allowWatchBookmarks=true&resourceVersion=5&timeoutSeconds=300&watch=true "
    ), head


def test_a_watch_the_server_never_ends_is_cut_off_after_its_grace(
    account: Account, scripted: tuple[ScriptedServer, list[bytes | Held]]
) -> None:
    server, answers = scripted
    answers.append(Held(_stream_head() + _event("c-1")))
    client = KubeClient(server.url, account.token_file, account.kube.ca_file)
    watch = Watch(client, CLAIMS, what="watching claims", resource_version="5", seconds=1,
                  grace_seconds=1.0)  # fmt: skip
    seen: list[Delivery] = []
    started = time.monotonic()
    with pytest.raises(KubeUnreachable) as held:
        for delivery in watch.deliveries():
            seen.append(delivery)
    assert len(seen) == 1
    assert 2.0 <= time.monotonic() - started < 15
    assert str(held.value).endswith(f"{server.url} kept the answer open past 2s")
