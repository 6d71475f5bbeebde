"""A read-only Kubernetes API client: GET of JSON from the API server, from inside a pod.

Why its own and not the Kubernetes Python client: fioprobe needs one verb on a few resources,
and its image keeps its HTTP to the standard library, hardened once (the Pushgateway's
transport, `fioprobe.gateway.transport`). The same rules hold here, for the same reasons:

- The server's certificate is verified against the pod's CA file, never skipped: the request
  carries the service account's bearer token.
- No redirect is followed: the API server never redirects a GET of a resource, and following
  a Location would send the token to whatever origin it names (http.client follows nothing).
- One deadline bounds each whole exchange (name resolution, connect, TLS, request, status,
  headers, body): socket timeouts bound each blocking call, not their sum, so a watchdog
  shuts the socket down at the deadline (`fioprobe.exchange`). A call makes a bounded number
  of requests (a list at most `MAX_PAGES`), so a call's time is bounded too. etcd's own disk
  being slow makes the API slow: exactly when the probe must not wait on it.
- An answer larger than `max_answer_bytes` is refused, and lists ask for object metadata only
  (PartialObjectMetadataList): a Node with its image list is tens of KiB, its name a few bytes.
- The token is read from its file at every request: projected service account tokens expire
  and the kubelet rewrites the file (about hourly); a token kept in memory would stop working.
  It never appears in a message: every message is built without it and scrubbed of it.

Each failure is a `KubeError` subclass whose message says what was asked (the caller's words
and the request line): unreachable, untrusted certificate, refused (401/403, with the API's
own message), not found, or an answer that cannot be used.
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fioprobe.errors import FioprobeError, UsageError
from fioprobe.exchange import Deadline, DeadlineHit, DeadlineHTTPSConnection, TooLarge, read_body
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
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"


class KubeError(FioprobeError):
    """The Kubernetes API could not be asked, refused, or answered what cannot be used.

    Exit status 2 (nothing was run); callers that have a fallback catch it."""


class KubeConfigError(KubeError, UsageError):
    """Where or how to reach the API is missing or cannot work (no pod environment, an
    unreadable token or CA file, a bad server URL): no retry can help."""


class KubeUnreachable(KubeError):
    """No answer: refused connection, a name that does not resolve, the deadline, a
    broken-off answer, or a server that says it is unavailable (5xx, 429)."""


class KubeUntrusted(KubeError):
    """The server's TLS certificate is not signed by the CA file (or names another host)."""


class KubeRefused(KubeError):
    """HTTP 401 (the token was not accepted) or 403 (the service account may not do this)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class KubeNotFound(KubeError):
    """HTTP 404: the object, or the resource itself, does not exist."""


class KubeBadAnswer(KubeError):
    """An answer that is not what the API sends: a redirect, another status, a body that is
    not JSON or not shaped as asked, or larger than the limit."""


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
        target = _target(path, query)
        body = self._exchange(target, accept, what)
        try:
            parsed: object = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            problem = getattr(exc, "msg", None) or type(exc).__name__
            raise KubeBadAnswer(
                f"{what} (GET {target}): {self.server} answered something that is not JSON "
                f"({problem})"
            ) from None
        if not isinstance(parsed, dict):
            raise KubeBadAnswer(
                f"{what} (GET {target}): {self.server} answered JSON that is not an object"
            )
        return parsed

    def list_names(self, path: str, *, what: str, label_selector: str | None = None) -> list[str]:
        """The names of the objects a list of `path` holds (e.g. /api/v1/nodes), only those
        matching `label_selector` when given; page by page, at most MAX_PAGES pages."""
        names: list[str] = []
        token = ""
        for _ in range(MAX_PAGES):
            query = {"limit": str(PAGE_SIZE)}
            if label_selector is not None:
                query["labelSelector"] = label_selector
            if token:
                query["continue"] = token
            answer = self.get(path, what=what, query=query, accept=_METADATA_LIST)
            shown = f"{what} (GET {_target(path, query)}): {self.server} answered"
            items = answer.get("items")
            if "items" not in answer or not isinstance(items, list | None):
                raise KubeBadAnswer(f"{shown} a {_kind(answer)}, not a list")
            for item in items or ():
                names.append(_object_name(item, shown))
            metadata = answer.get("metadata")
            token = metadata.get("continue", "") if isinstance(metadata, dict) else ""
            if not isinstance(token, str) or len(token) > 64 * 1024:
                raise KubeBadAnswer(f"{shown} a list whose continue token is not a string")
            if not token:
                return names
        raise KubeBadAnswer(
            f"{what} (GET {path}): more than {MAX_PAGES * PAGE_SIZE} objects, more than "
            "fioprobe reads in one list"
        )

    def _exchange(self, target: str, accept: str, what: str) -> bytes:
        """One GET within the deadline: the body of a 200, or the KubeError it stands for,
        its message scrubbed of the token."""
        asked = f"{what} (GET {target})"
        token = self._token(asked)
        try:
            answer = self._send(target, accept, token, asked)
        except KubeError as exc:
            raise type(exc)(_hide(str(exc), token)) from None
        if answer.status == 200:
            return answer.body
        error = self._refusal(answer, asked)
        if isinstance(error, KubeRefused):
            raise KubeRefused(_hide(str(error), token), error.status)
        raise type(error)(_hide(str(error), token))

    def _send(self, target: str, accept: str, token: str, asked: str) -> _Answer:
        host, port = _split_server(self.server)
        context = self._tls(asked)  # before the deadline: reading files is not network time
        deadline = Deadline(self.timeout_seconds)
        connection = DeadlineHTTPSConnection(
            host, port, timeout=deadline.seconds, context=context, deadline=deadline
        )
        try:
            connection.request(
                "GET",
                target,
                headers={"Authorization": f"Bearer {token}", "Accept": accept,
                         "User-Agent": _USER_AGENT},
            )  # fmt: skip
            response = connection.getresponse()
            ok = response.status == 200
            limit = self.max_answer_bytes if ok else _REFUSAL_BYTES
            body = read_body(response, limit, strict=ok, read_bytes=_READ_BYTES)
            location = response.getheader("Location") or ""
            return _Answer(response.status, response.reason, location, body)
        except TooLarge:
            raise KubeBadAnswer(
                f"{asked}: the answer of {self.server} is larger than "
                f"{self.max_answer_bytes} bytes, more than fioprobe reads"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            if deadline.hit() or isinstance(exc, DeadlineHit):
                raise KubeUnreachable(
                    f"{asked}: no complete answer from {self.server} within "
                    f"{self.timeout_seconds:g}s"
                ) from None
            raise self._network_problem(exc, asked) from None
        finally:
            connection.close()
            deadline.close()

    def _refusal(self, answer: _Answer, asked: str) -> KubeError:
        status = f"HTTP {answer.status}" + (
            f" {printable(answer.reason, 60)}" if answer.reason else ""
        )
        said = _api_message(answer.body)
        tail = f": {said}" if said else ""
        where = f"{asked}: {self.server} answered {status}"
        if 300 <= answer.status < 400:
            location = printable(answer.location, 200)
            return KubeBadAnswer(
                f"{where} (a redirect{' to ' + location if location else ''}); the API server "
                "does not redirect, refusing to follow"
            )
        if answer.status == 401:
            return KubeRefused(
                f"{where}{tail} (the service account token in {self.token_file} was not "
                "accepted: expired, or of another cluster)",
                401,
            )
        if answer.status == 403:
            return KubeRefused(
                f"{where}{tail} (the pod's service account is not allowed to: see its RBAC)", 403
            )
        if answer.status == 404:
            return KubeNotFound(f"{where}{tail}")
        if answer.status == 429 or answer.status >= 500:
            return KubeUnreachable(f"{where}{tail}")
        return KubeBadAnswer(f"{where}{tail}")

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


def _api_message(body: bytes) -> str:
    """What a refusal says: the `message` of the API's Status object, else its text."""
    text = body.decode("utf-8", errors="replace")
    with contextlib.suppress(ValueError, RecursionError):
        parsed: object = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
            return printable(parsed["message"], 400)
    return printable(text, 300)


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
