"""A Kubernetes API client: JSON over HTTPS from inside a pod (get, list, create, delete, watch).

Why its own and not the Kubernetes Python client: fioprobe needs four verbs on a few resources,
and its image keeps its HTTP to the standard library, hardened once (the Pushgateway's
transport, `fioprobe.gateway.transport`). The same rules hold here, for the same reasons:

- The server's certificate is verified against the pod's CA file, never skipped: the request
  carries the service account's bearer token.
- No redirect is followed: the API server never redirects a request for a resource, and
  following a Location would send the token to whatever origin it names (http.client follows
  nothing).
- One deadline bounds each whole exchange (name resolution, connect, TLS, request, status,
  headers, body): socket timeouts bound each blocking call, not their sum, so a watchdog
  shuts the socket down at the deadline (`fioprobe.exchange`). A call makes a bounded number
  of requests (a list at most `MAX_PAGES`), so a call's time is bounded too. etcd's own disk
  being slow makes the API slow: exactly when the probe must not wait on it. A watch is one
  long exchange under a deadline of its own (`fioprobe.kube.watch`).
- An answer larger than `max_answer_bytes` is refused, and lists ask for object metadata only
  (PartialObjectMetadataList): a Node with its image list is tens of KiB, its name a few bytes.
- The token is read from its file at every request: projected service account tokens expire
  and the kubelet rewrites the file (about hourly); a token kept in memory would stop working.
  It never appears in a message: every message is built without it and scrubbed of it.

Each failure is a `KubeError` subclass (`fioprobe.kube.errors`) whose message says what was
asked (the caller's words and the request line): unreachable, untrusted certificate, refused
(401/403, with the API's own message), not found, a conflict, an invalid object, or an answer
that cannot be used.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import ssl
import stat
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fioprobe.exchange import Deadline, DeadlineHit, DeadlineHTTPSConnection, TooLarge, read_body
from fioprobe.kube.errors import (
    KubeBadAnswer,
    KubeConfigError,
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    KubeRefused,
    KubeUnreachable,
    KubeUntrusted,
)
from fioprobe.kube.stream import Stream
from fioprobe.text import printable

#: Where the kubelet mounts the pod's service account: token, CA and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: The API server's address in every pod (set by the kubelet, even with enableServiceLinks off).
ENV_HOST = "KUBERNETES_SERVICE_HOST"
ENV_PORT = "KUBERNETES_SERVICE_PORT"
#: One whole request. The API answers a small list in milliseconds; 10 s is a server in
#: trouble, and the caller has a fallback (the last list read) that is better than waiting.
REQUEST_SECONDS = 10.0
#: The largest answer read. A list of object metadata is about 1 KiB per object.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: Objects per page of a list, and the most pages one list call reads (10,000 objects).
PAGE_SIZE = 500
MAX_PAGES = 20
#: The most of a refusal's body read for its message (a Status object is a few hundred bytes).
_REFUSAL_BYTES = 16 * 1024
#: The most one read of an answer's body asks for; the limit is checked after each.
_READ_BYTES = 256 * 1024
#: A token file larger than this is not a token (a wrong path, /dev/zero). Tokens are ~1 KiB.
_TOKEN_LIMIT_BYTES = 64 * 1024
_USER_AGENT = "fioprobe"
_JSON = "application/json"
#: Ask for the objects' metadata alone, with the full list as the fallback of a server too old
#: to make it (meta.k8s.io/v1 came with Kubernetes 1.15).
METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"


@dataclass(frozen=True, slots=True)
class _Answer:
    """One answer of the API server: its status line, the Location of a redirect (for the
    message) and the body, bounded."""

    status: int
    reason: str
    location: str
    body: bytes


@dataclass(frozen=True, slots=True)
class KubeClient:
    """How to reach the API server: its https URL, the token and CA files, the limits.

    Tests give the three locations explicitly; a pod uses `from_pod`.
    """

    server: str
    token_file: Path
    ca_file: Path
    timeout_seconds: float = REQUEST_SECONDS
    max_answer_bytes: int = MAX_ANSWER_BYTES

    def __post_init__(self) -> None:
        _split_server(self.server)
        seconds: object = self.timeout_seconds
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or not 0 < seconds <= 600
        ):
            raise KubeConfigError(
                f"Kubernetes API timeout must be above 0 and at most 600 seconds, got {seconds!r}"
            )
        if self.max_answer_bytes < 1024:
            raise KubeConfigError("Kubernetes API answer limit must be at least 1024 bytes")

    @classmethod
    def from_pod(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        directory: Path = SERVICE_ACCOUNT_DIR,
        timeout_seconds: float = REQUEST_SECONDS,
    ) -> KubeClient:
        """The API server of the pod this runs in: https://$KUBERNETES_SERVICE_HOST:$..._PORT
        (an IPv6 address in brackets), the service account's token and CA files."""
        env = os.environ if environ is None else environ
        host, port = env.get(ENV_HOST, "").strip(), env.get(ENV_PORT, "").strip()
        if not host or not port:
            missing = " and ".join(n for n, v in ((ENV_HOST, host), (ENV_PORT, port)) if not v)
            raise KubeConfigError(
                f"{missing} not set: not running in a Kubernetes pod, so the API server "
                "cannot be found"
            )
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}",
            directory / "token",
            directory / "ca.crt",
            timeout_seconds=timeout_seconds,
        )

    # -- requests ---------------------------------------------------------------------------

    def get(
        self,
        path: str,
        *,
        what: str,
        query: Mapping[str, str] | None = None,
        accept: str = _JSON,
    ) -> dict[str, Any]:
        """GET `path` (e.g. /api/v1/nodes/n1) with `query`; the JSON object answered.

        `what` says, in the caller's words, what was asked ("listing the nodes labelled
        x"): every error message starts with it and the request line."""
        return self._json("GET", path, query, what, accept=accept)

    def create(self, path: str, obj: Mapping[str, Any], *, what: str) -> dict[str, Any]:
        """POST `obj` into the collection at `path` (e.g. /api/v1/namespaces/x/pods); the
        object as the API server stored it (its uid and resourceVersion filled in)."""
        return self._json("POST", path, None, what, body=obj, ok=(200, 201, 202))

    def delete(
        self,
        path: str,
        *,
        what: str,
        uid: str | None = None,
        grace_seconds: int | None = None,
    ) -> dict[str, Any]:
        """DELETE the object at `path`, its dependents in the background; what the API
        answered (the object, now being deleted, or a Status).

        With `uid`, only that very object: a namesake made since (someone else's) is refused
        as a conflict, never deleted. A 404 is KubeNotFound: whether gone is fine is the
        caller's to say."""
        options: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        return self._json("DELETE", path, None, what, body=options, ok=(200, 202))

    def list_names(self, path: str, *, what: str, label_selector: str | None = None) -> list[str]:
        """The names of the objects a list of `path` holds (e.g. /api/v1/nodes), only those
        matching `label_selector` when given; page by page, at most MAX_PAGES pages."""
        names: list[str] = []
        for items, shown, _ in self._pages(path, what, label_selector, None, METADATA_LIST):
            names.extend(_object_name(item, shown) for item in items)
        return names

    def list_objects(
        self,
        path: str,
        *,
        what: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """The whole objects of the list at `path` and the list's resourceVersion (where a
        watch of the same list starts, missing nothing in between); at most MAX_PAGES
        pages, one snapshot (the pages of a list share the first page's version)."""
        objects: list[dict[str, Any]] = []
        version = ""
        for items, shown, page_version in self._pages(
            path, what, label_selector, field_selector, _JSON
        ):
            for item in items:
                _object_name(item, shown)
                objects.append(item)
            version = version or page_version
        return objects, version

    def stream(self, path: str, *, what: str, query: Mapping[str, str], seconds: float) -> Stream:
        """GET `path` and keep its answer open to be read as it comes (a watch), for at most
        `seconds`. Any status but 200 is the KubeError it stands for. The reader releases
        the stream."""
        target = _target(path, query)
        asked = f"{what} (GET {target})"
        token = self._token(asked)
        try:
            connection, response, deadline = self._open(
                "GET", target, _JSON, token, asked, None, seconds
            )
            if response.status == 200:
                return Stream(connection, response, deadline, asked, self.server)
            try:
                answer = self._read(response, deadline, asked, ok=False)
            finally:
                connection.close()
                deadline.close()
            raise self._refusal(answer, asked)
        except KubeError as exc:
            raise _scrubbed(exc, token) from None

    def _pages(
        self,
        path: str,
        what: str,
        label_selector: str | None,
        field_selector: str | None,
        accept: str,
    ) -> Iterator[tuple[list[Any], str, str]]:
        """Each page of a list: its items, how to name the request in a message, and the
        list's resourceVersion."""
        token = ""
        for _ in range(MAX_PAGES):
            query = {"limit": str(PAGE_SIZE)}
            if label_selector is not None:
                query["labelSelector"] = label_selector
            if field_selector is not None:
                query["fieldSelector"] = field_selector
            if token:
                query["continue"] = token
            answer = self.get(path, what=what, query=query, accept=accept)
            shown = f"{what} (GET {_target(path, query)}): {self.server} answered"
            items = answer.get("items")
            if "items" not in answer or not isinstance(items, list | None):
                raise KubeBadAnswer(f"{shown} a {_kind(answer)}, not a list")
            metadata = answer.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            token = metadata.get("continue", "")
            if not isinstance(token, str) or len(token) > 64 * 1024:
                raise KubeBadAnswer(f"{shown} a list whose continue token is not a string")
            version = metadata.get("resourceVersion", "")
            if not isinstance(version, str) or len(version) > 256:
                raise KubeBadAnswer(f"{shown} a list whose resourceVersion is not a string")
            yield items or [], shown, version
            if not token:
                return
        raise KubeBadAnswer(
            f"{what} (GET {path}): more than {MAX_PAGES * PAGE_SIZE} objects, more than "
            "fioprobe reads in one list"
        )

    def _json(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        what: str,
        *,
        accept: str = _JSON,
        body: Mapping[str, Any] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> dict[str, Any]:
        """One request whose answer is a JSON object: the object, or the KubeError the
        answer stands for."""
        target = _target(path, query)
        sent = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        raw = self._exchange(method, target, accept, what, sent, ok)
        try:
            parsed: object = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            problem = getattr(exc, "msg", None) or type(exc).__name__
            raise KubeBadAnswer(
                f"{what} ({method} {target}): {self.server} answered something that is not "
                f"JSON ({problem})"
            ) from None
        if not isinstance(parsed, dict):
            raise KubeBadAnswer(
                f"{what} ({method} {target}): {self.server} answered JSON that is not an object"
            )
        return parsed

    def _exchange(
        self,
        method: str,
        target: str,
        accept: str,
        what: str,
        body: bytes | None,
        ok: tuple[int, ...],
    ) -> bytes:
        """One request within the deadline: the body of an answer whose status is `ok`, or
        the KubeError it stands for, its message scrubbed of the token."""
        asked = f"{what} ({method} {target})"
        token = self._token(asked)
        try:
            connection, response, deadline = self._open(
                method, target, accept, token, asked, body, self.timeout_seconds
            )
            try:
                answer = self._read(response, deadline, asked, ok=response.status in ok)
            finally:
                connection.close()
                deadline.close()
            if answer.status in ok:
                return answer.body
            raise self._refusal(answer, asked)
        except KubeError as exc:
            raise _scrubbed(exc, token) from None

    def _open(
        self,
        method: str,
        target: str,
        accept: str,
        token: str,
        asked: str,
        body: bytes | None,
        seconds: float,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, Deadline]:
        """Send the request and read the answer's status and headers, within a deadline of
        `seconds` that keeps running for the body: the caller reads it, then closes both."""
        host, port = _split_server(self.server)
        context = self._tls(asked)  # before the deadline: reading files is not network time
        deadline = Deadline(seconds)
        connection = DeadlineHTTPSConnection(
            host, port, timeout=deadline.seconds, context=context, deadline=deadline
        )
        headers = {"Authorization": f"Bearer {token}", "Accept": accept, "User-Agent": _USER_AGENT}
        if body is not None:
            headers["Content-Type"] = _JSON
        try:
            connection.request(method, target, body=body, headers=headers)
            return connection, connection.getresponse(), deadline
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            deadline.close()
            raise self._failed(exc, deadline, asked) from None

    def _read(
        self, response: http.client.HTTPResponse, deadline: Deadline, asked: str, *, ok: bool
    ) -> _Answer:
        """The answer with its body: whole and within the limit when `ok` (an answer to
        use), else what fits of it (a refusal, read for its message)."""
        limit = self.max_answer_bytes if ok else _REFUSAL_BYTES
        try:
            body = read_body(response, limit, strict=ok, read_bytes=_READ_BYTES)
        except TooLarge:
            raise KubeBadAnswer(
                f"{asked}: the answer of {self.server} is larger than "
                f"{self.max_answer_bytes} bytes, more than fioprobe reads"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise self._failed(exc, deadline, asked) from None
        location = response.getheader("Location") or ""
        return _Answer(response.status, response.reason, location, body)

    def _failed(self, exc: BaseException, deadline: Deadline, asked: str) -> KubeError:
        if deadline.hit() or isinstance(exc, DeadlineHit):
            return KubeUnreachable(
                f"{asked}: no complete answer from {self.server} within {deadline.seconds:g}s"
            )
        return self._network_problem(exc, asked)

    def _refusal(self, answer: _Answer, asked: str) -> KubeError:
        status = f"HTTP {answer.status}" + (
            f" {printable(answer.reason, 60)}" if answer.reason else ""
        )
        said, status_object = _api_message(answer.body)
        tail = f": {said}" if said else ""
        where = f"{asked}: {self.server} answered {status}"
        code = answer.status
        if 300 <= code < 400:
            location = printable(answer.location, 200)
            return KubeBadAnswer(
                f"{where} (a redirect{' to ' + location if location else ''}); the API server "
                "does not redirect, refusing to follow",
                code,
            )
        if code == 401:
            return KubeRefused(
                f"{where}{tail} (the service account token in {self.token_file} was not "
                "accepted: expired, or of another cluster)",
                code,
                status_object,
            )
        if code == 403:
            # The authorizer names the user it refused; an admission plugin (a quota, Pod
            # Security, a missing service account) says what it refused, and RBAC is no help.
            rbac = ' is forbidden: User "' in said or not said
            hint = " (the pod's service account is not allowed to: see its RBAC)" if rbac else ""
            return KubeRefused(f"{where}{tail}{hint}", code, status_object)
        kinds: dict[int, type[KubeError]] = {404: KubeNotFound, 409: KubeConflict, 422: KubeInvalid}
        if code in kinds:
            return kinds[code](f"{where}{tail}", code, status_object)
        if code == 429 or code >= 500:
            return KubeUnreachable(f"{where}{tail}", code, status_object)
        return KubeBadAnswer(f"{where}{tail}", code, status_object)

    def _network_problem(self, exc: BaseException, asked: str) -> KubeError:
        if isinstance(exc, ssl.SSLCertVerificationError):
            return KubeUntrusted(
                f"{asked}: the TLS certificate of {self.server} is not trusted (certificate "
                f"verify failed: {printable(exc.verify_message or str(exc), 200)}) by the CA "
                f"file {self.ca_file}"
            )
        if isinstance(exc, http.client.IncompleteRead):
            return KubeUnreachable(
                f"{asked}: {self.server} broke off its answer after {len(exc.partial)} bytes"
            )
        if isinstance(exc, http.client.RemoteDisconnected):
            return KubeUnreachable(
                f"{asked}: {self.server} closed the connection without an answer"
            )
        if isinstance(exc, http.client.HTTPException | ssl.SSLError):
            name = type(exc).__name__
            detail = printable(str(exc), 120)
            return KubeUnreachable(
                f"{asked}: {self.server} answered something that is not HTTPS ({name}"
                + (f": {detail})" if detail else ")")
            )
        problem = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return KubeUnreachable(f"{asked}: cannot reach {self.server}: {printable(problem, 200)}")

    # -- the pod's files --------------------------------------------------------------------

    def _token(self, asked: str) -> str:
        """The bearer token, read now (it rotates). Never shown: only its file is named."""
        raw = _read_small_file(self.token_file, f"{asked}: the service account token")
        try:
            token = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            token = ""
        # A header value: no whitespace or control character may reach it (header injection).
        if not token or not token.isprintable() or any(c.isspace() for c in token):
            raise KubeConfigError(
                f"{asked}: the service account token file {self.token_file} does not hold a "
                "bearer token"
            )
        return token

    def _tls(self, asked: str) -> ssl.SSLContext:
        """A context that verifies the server against the CA file (read now: it is a
        projected ConfigMap that changes when the cluster's CA rotates)."""
        try:
            return ssl.create_default_context(cafile=str(self.ca_file))
        except (OSError, ssl.SSLError) as exc:
            problem = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
            raise KubeConfigError(
                f"{asked}: cannot read the CA file {self.ca_file}: {printable(str(problem), 200)}"
            ) from None


# --- names and messages -------------------------------------------------------------------


def _split_server(server: str) -> tuple[str, int]:
    """(host, port) of an https base URL; anything else is a KubeConfigError."""
    shown = printable(server, 200)
    try:
        parts = urllib.parse.urlsplit(server)
        port = parts.port
    except ValueError:
        raise KubeConfigError(f"Kubernetes API server URL {shown} has an invalid port") from None
    if parts.scheme != "https":
        raise KubeConfigError(
            f"Kubernetes API server URL {shown} must start with https:// (the service "
            "account token never goes over plain HTTP)"
        )
    if "@" in parts.netloc:
        raise KubeConfigError(f"Kubernetes API server URL {shown} must not hold credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise KubeConfigError(
            f"Kubernetes API server URL {shown} must be a base URL (scheme, host and port)"
        )
    if not parts.hostname:
        raise KubeConfigError(f"Kubernetes API server URL {shown} has no host")
    return parts.hostname, port or 443


def _target(path: str, query: Mapping[str, str] | None) -> str:
    """The request target: an absolute path of the API (ASCII, no query, no '..', nothing a
    request line could not carry as it is), its query encoded."""
    plain = (
        path.startswith("/")
        and path.isascii()
        and path.isprintable()
        and not any(c in path for c in " ?#%")
        and ".." not in path.split("/")
    )
    if not plain:
        raise KubeConfigError(f"Kubernetes API path {printable(path, 200)} is not a plain path")
    return path + ("?" + urllib.parse.urlencode(sorted(query.items())) if query else "")


def _object_name(item: object, shown: str) -> str:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not 0 < len(name) <= 253 or not name.isprintable():
        raise KubeBadAnswer(f"{shown} a list item without a name")
    return name


def _kind(answer: dict[str, Any]) -> str:
    kind = answer.get("kind")
    return printable(kind, 60) if isinstance(kind, str) and kind else "JSON object"


def _api_message(body: bytes) -> tuple[str, dict[str, Any] | None]:
    """What a refusal says: the `message` of the API's Status object, else its text; and the
    Status object itself when the body was one."""
    text = body.decode("utf-8", errors="replace")
    with contextlib.suppress(ValueError, RecursionError):
        parsed: object = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            status_object = parsed if parsed.get("kind") == "Status" else None
            return printable(parsed["message"], 400), status_object
    return printable(text, 300), None


def _scrubbed(error: KubeError, token: str) -> KubeError:
    """`error` again, its message without the token (its status and Status object kept)."""
    return type(error)(_hide(str(error), token), error.status, error.answer)


def _hide(text: str, token: str) -> str:
    """`text` without the token, however it got there."""
    return text.replace(token, "***") if token else text


def _read_small_file(path: Path, what: str) -> bytes:
    """A small regular file's bytes (a token): opened without blocking on a FIFO, refused
    when it is not a regular file or larger than a token can be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise KubeConfigError(f"{what} {path} cannot be read: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise KubeConfigError(f"{what} {path} is not a regular file")
        data = os.read(fd, _TOKEN_LIMIT_BYTES + 1)
    except OSError as exc:
        raise KubeConfigError(f"{what} {path} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > _TOKEN_LIMIT_BYTES:
        raise KubeConfigError(f"{what} {path} is larger than {_TOKEN_LIMIT_BYTES} bytes")
    return data
