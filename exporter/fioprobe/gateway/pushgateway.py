"""Talking to the Pushgateway: push a group (PUT), read a group back (GET), delete a group.

Credentials never come from the command line itself: the username and password are read from
environment variables or mounted files (a Kubernetes Secret), the CA and client certificate
from files. One `Transport` carries them for every request.

Every request is one exchange with a hard deadline and without redirects. A Pushgateway never
redirects, so a 3xx is either a misconfiguration or someone trying to collect the basic-auth
header; following it would send the credentials to whatever origin it names. A server that
answers slowly, or never finishes, must not hold a CronJob past its schedule, so the deadline
bounds the whole exchange, not each socket read.

What is read back feeds cumulative counters that must never go backwards and never carry
garbage: the answer is checked for the Pushgateway's shape, and every value fioprobe keeps is
checked for what its metric promises (see `read_group`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import math
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry, push_to_gateway, pushadd_to_gateway
from prometheus_client.exposition import delete_from_gateway

from fioprobe.errors import ExitCode, FioprobeError, UsageError
from fioprobe.gateway import defaults as push_defaults
from fioprobe.metrics.histogram import BUCKET_BOUNDS_SECONDS, BUCKET_COUNT, le_label
from fioprobe.metrics.table import EXPORTED_OPS
from fioprobe.publish.totals import COUNT_LIMIT, GroupTotals, HistogramTotals
from fioprobe.text import printable

if TYPE_CHECKING:  # config imports yaml; a push must not pay for it
    from fioprobe.probe.config import PushgatewayConfig

T = TypeVar("T")

JOB = "fioprobe"
ENV_USERNAME = "FIOPROBE_PUSHGATEWAY_USERNAME"
ENV_PASSWORD = "FIOPROBE_PUSHGATEWAY_PASSWORD"
METRICS_API = "/api/v1/metrics"

#: The most fioprobe reads of a /api/v1/metrics answer. The answer holds every group of the
#: Pushgateway (a few kB each); anything larger is not an answer fioprobe should trust, and
#: reading it without a bound would let one server exhaust the probe's memory.
READ_BACK_LIMIT_BYTES = 64 * 1024 * 1024
#: The most of a refusal's body read for the error message.
_REFUSAL_BODY_BYTES = 4096
#: A credential file larger than this is not a credential (a wrong path, /dev/zero).
_SECRET_FILE_LIMIT_BYTES = 64 * 1024
COUNTERS = (
    "fioprobe_runs_total",
    "fioprobe_failures_total",
    "fioprobe_read_bytes_total",
    "fioprobe_written_bytes_total",
)
LAST_SUCCESS = "fioprobe_last_success_timestamp_seconds"
WRITER_INFO = "fioprobe_writer_info"
PUSH_IDS = ("fioprobe_push_id", "fioprobe_push_basis_id")
PUSH_TIME = "push_time_seconds"


class PushError(FioprobeError):
    """The Pushgateway could not be reached, refused, or answered what cannot be trusted."""

    exit_code = ExitCode.PUSH_FAILED


class TransportConfigError(UsageError):
    """A Pushgateway setting that cannot work (URL, credentials, timeout, attempts).

    These are the user's to fix and no retry can help, so they end the command at once with
    the usage exit status instead of being reported as a push failure.
    """


def redact(url: str) -> str:
    """`url` with everything between the scheme and its last '@' replaced by '***'.

    Used for every URL this module shows. A password may hold characters that end the
    userinfo early for a URL parser ('/', '#'), so the cut is at the last '@': it can hide
    more than the userinfo (an '@' in a path), never less.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    at = rest.rfind("@")
    if at < 0:
        return url
    return f"{scheme}{separator}***@{rest[at + 1 :]}"


@dataclass(frozen=True, slots=True)
class Transport:
    """How to reach the Pushgateway: URL, credentials, TLS, deadline and retries.

    Time bound: one attempt (name resolution, connect, TLS handshake, sending, status line,
    headers and the whole body together) ends after at most `timeout_seconds`; attempts are
    separated by `backoff_seconds`, doubled after each. One call therefore returns within
    `attempts * timeout_seconds + backoff_seconds * (2 ** (attempts - 1) - 1)`, plus the CPU
    time to parse an answer already received (bounded by READ_BACK_LIMIT_BYTES). With the
    defaults (10 s, 3 attempts, 0.5 s) that is 31.5 s.

    A refused request (4xx), a redirect, an untrusted certificate or an answer of the wrong
    shape is final; a network error, a deadline hit, a broken-off answer or a 5xx is retried.
    """

    url: str
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout_seconds: float = push_defaults.TIMEOUT_SECONDS
    attempts: int = push_defaults.ATTEMPTS
    backoff_seconds: float = push_defaults.BACKOFF_SECONDS

    def __post_init__(self) -> None:
        _check_url(self.url)
        _check_number("timeout", self.timeout_seconds, minimum=0.0, inclusive=False)
        _check_number("backoff", self.backoff_seconds, minimum=0.0, inclusive=True)
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise TransportConfigError(
                f"Pushgateway attempts must be a whole number of at least 1, got {self.attempts!r}"
            )
        if (self.username is None) != (self.password is None):
            given = "username" if self.password is None else "password"
            raise TransportConfigError(
                f"basic auth needs both a username and a password; only the {given} was given"
            )
        if self.username is not None and ":" in self.username:
            raise TransportConfigError("basic auth username must not contain ':'")
        if self.key_file and not self.cert_file:
            raise TransportConfigError("a client key file needs its certificate file as well")

    @classmethod
    def from_sources(
        cls,
        url: str,
        *,
        username_file: str | None = None,
        password_file: str | None = None,
        **options: object,
    ) -> Transport:
        """Credentials from files when given, else from the environment.

        A URL without a scheme gets http://; credentials inside the URL are refused, because
        a URL ends up in logs, process lists and error messages.
        """
        _check_no_credentials(url)
        if "://" not in url:
            url = "http://" + url
        else:
            scheme, _, rest = url.partition("://")
            url = f"{scheme.lower()}://{rest}"
        username = _read_secret(username_file) if username_file else os.environ.get(ENV_USERNAME)
        password = _read_secret(password_file) if password_file else os.environ.get(ENV_PASSWORD)
        return cls(url=url.rstrip("/"), username=username, password=password, **options)  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, config: PushgatewayConfig, url: str | None = None) -> Transport:
        """The Pushgateway of a `fioprobe run` configuration, credentials and TLS included;
        `url` picks one of its replicas instead of `config.url`."""
        return cls.from_sources(
            url or config.url,
            username_file=config.username_file,
            password_file=config.password_file,
            ca_file=config.ca_file,
            cert_file=config.cert_file,
            key_file=config.key_file,
            timeout_seconds=config.timeout_seconds,
            attempts=config.attempts,
        )

    @property
    def shown_url(self) -> str:
        """The URL as every message shows it."""
        return redact(self.url)

    # -- requests ---------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https://"):
            return None
        # Unreadable TLS files are reported at once and say which file; not retried.
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise PushError(f"cannot read CA file {self.ca_file}: {_os_problem(exc)}") from None
        if self.cert_file:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as exc:
                raise PushError(
                    f"cannot load client certificate {self.cert_file}: {_os_problem(exc)}"
                ) from None
        return context

    def _auth_headers(self) -> dict[str, str]:
        if self.username is None:
            return {}
        return {"Authorization": f"Basic {self._token()}"}

    def _token(self) -> str:
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()

    def handler(
        self,
        url: str,
        method: str,
        timeout: float | None,
        headers: list[tuple[str, str]],
        data: bytes,
    ) -> Callable[[], None]:
        """prometheus_client push handler: one deadline-bound, never-redirected exchange.

        `timeout` is prometheus_client's; the transport's own deadline applies instead.
        """

        def send() -> None:
            answer = self._exchange(method, url, headers, data, limit=0)
            # A Pushgateway accepts with an empty body. A web page with 200 is something else
            # in the way (a login page, a proxy's error page): the push did not happen.
            if answer.content_type.split(";")[0].strip().lower() in _PAGE_TYPES:
                raise _Final(
                    f"{self.shown_url} answered {method} with a web page "
                    f"({answer.content_type}), not as a Pushgateway does: nothing was stored"
                )

        return send

        return send

    def _get(self, path: str, limit: int) -> _Answer:
        return self._exchange("GET", self.url + path, [], None, limit=limit)

    def _exchange(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        data: bytes | None,
        *,
        limit: int,
    ) -> _Answer:
        """One request within the deadline; the 2xx answer with at most `limit` body bytes.

        Raises _Final or _Transient with a message for people; `retrying` adds what was done.
        """
        request = urllib.request.Request(url, data=data, method=method)
        for name, value in headers:
            request.add_header(name, value)
        for name, value in self._auth_headers().items():
            # Never copied to another request, even if a redirect were ever followed.
            request.add_unredirected_header(name, value)
        context = self._ssl_context()  # before the deadline: reading files is not network time
        deadline = _Deadline(self.timeout_seconds)
        try:
            with _opener(deadline, context).open(request, timeout=self.timeout_seconds) as answer:
                content_type = answer.headers.get("Content-Type", "")
                body = _read_body(answer, limit) if limit else b""
                return _Answer(answer.status, content_type, body)
        except urllib.error.HTTPError as exc:
            raise self._refusal(exc) from None
        except _TooLarge:
            raise _Final(
                f"the answer of {redact(url)} is larger than {_size(limit)}, more than fioprobe "
                "reads: not a Pushgateway answer fioprobe can use"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if deadline.hit() or isinstance(cause, _DeadlineHit):
                raise _Transient(
                    f"no complete answer from {self.shown_url} within {self.timeout_seconds:g}s"
                ) from None
            raise self._network_problem(exc) from None
        finally:
            deadline.close()

    def _refusal(self, exc: urllib.error.HTTPError) -> _Final | _Transient:
        """A non-2xx answer: a redirect and a 4xx are final, a 5xx may pass."""
        try:
            if 300 <= exc.code < 400:
                location = printable(exc.headers.get("Location") or "", 200)
                target = f"redirect to {redact(location)}" if location else "redirect"
                return _Final(
                    f"{self.shown_url} answered HTTP {exc.code} ({target}); a Pushgateway "
                    "does not redirect, refusing to follow"
                )
            problem = f"{self.shown_url} answered {_http_problem(exc)}"
            return _Transient(problem) if exc.code >= 500 else _Final(problem)
        finally:
            with contextlib.suppress(Exception):
                exc.close()

    def _network_problem(self, exc: BaseException) -> _Final | _Transient:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(cause, ssl.SSLCertVerificationError):  # final, like a 4xx
            return _Final(
                f"TLS certificate of {self.shown_url} is not trusted (certificate verify "
                f"failed: {cause.verify_message}); give the CA that signed it with --ca-file "
                "(pushgateway.ca_file in the configuration)"
            )
        if isinstance(cause, http.client.IncompleteRead):
            got = len(cause.partial)
            total = f" of {got + cause.expected}" if cause.expected is not None else ""
            return _Transient(f"{self.shown_url} broke off its answer after {got}{total} bytes")
        if isinstance(cause, http.client.RemoteDisconnected):
            return _Transient(f"{self.shown_url} closed the connection without an answer")
        if isinstance(cause, http.client.HTTPException):
            detail = printable(str(cause), 80)
            name = type(cause).__name__
            return _Transient(
                f"{self.shown_url} answered something that is not HTTP ({name}"
                + (f": {detail})" if detail else ")")
            )
        return _Transient(f"cannot reach {self.shown_url}: {printable(str(cause), 200)}")

    def retrying(self, what: str, action: Callable[[], T]) -> T:
        """Run `action`, retrying with exponential backoff when another attempt may help.

        A refusal (4xx), a redirect or an untrusted certificate is final: retrying cannot fix
        it. Every message is one line, shows the URL redacted and never a secret.
        """
        delay = self.backoff_seconds
        for attempt in range(1, self.attempts + 1):
            try:
                return action()
            except _Final as exc:
                raise self.error(f"{what}: {exc.problem}") from None
            except _Transient as exc:
                if attempt == self.attempts:
                    tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
                    raise self.error(f"{what}: {exc.problem} (after {tries})") from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def error(self, message: str) -> PushError:
        """A PushError whose message is one line and holds no secret of this transport."""
        return PushError(self.scrub(message))

    def scrub(self, text: str) -> str:
        """`text` on one line, with the password and the Authorization token hidden
        (before and after `printable`, which may change how a secret is written)."""
        text = printable(self._hide(text), 2000)
        return self._hide(text)

    def _hide(self, text: str) -> str:
        if self.username is not None:
            for secret in (self._token(), f"{self.username}:{self.password}", self.password):
                if secret:
                    text = text.replace(secret, "***")
        return text


# --- one exchange -------------------------------------------------------------------------


#: Content types no Pushgateway answers a push with: whoever sent them did not store it.
_PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    content_type: str
    body: bytes


class _Outcome(Exception):
    """How one attempt failed, as a message for people (without what was being done)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _Final(_Outcome):
    """An attempt's outcome that another attempt cannot change."""


class _Transient(_Outcome):
    """An attempt's outcome that another attempt may not repeat."""


class _TooLarge(Exception):
    pass


class _DeadlineHit(TimeoutError):
    pass


class _Deadline:
    """The end of one exchange, enforced by a watchdog.

    Socket timeouts bound each blocking call, not their sum: a server sending one byte
    every few seconds satisfies every recv and never ends. So a timer fires at the deadline
    and shuts the connection down: every blocked or later read and write on it returns at
    once, whatever http.client, ssl or the body reader was doing. The watchdog holds its own
    duplicate of each socket's descriptor, so it can never shut down a descriptor number that
    was closed and reused meanwhile.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []
        self._expired = False
        self._closed = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def hit(self) -> bool:
        return self._expired or time.monotonic() >= self.end

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0 or self._expired:
            raise _DeadlineHit(f"no answer within {self.seconds:g}s")
        return left

    def _fire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._expired = True
            for sock in self._watched:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def watch(self, sock: socket.socket) -> None:
        duplicate = sock.dup()
        with self._lock:
            if self._closed or self._expired:
                duplicate.close()
                raise _DeadlineHit(f"no answer within {self.seconds:g}s")
            self._watched.append(duplicate)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            for sock in self._watched:
                sock.close()
            self._watched.clear()

    def connect(
        self,
        address: tuple[str, int],
        timeout: object = None,
        source_address: tuple[str, int] | None = None,
    ) -> socket.socket:
        """socket.create_connection within the deadline, the socket under the watchdog.

        Name resolution cannot be interrupted, so it runs in a helper thread that is given
        up on at the deadline (it ends on its own, as the resolver's own timeout allows).
        """
        host, port = address
        last: OSError | None = None
        for family, kind, proto, _, sockaddr in self._resolve(host, port):
            sock = socket.socket(family, kind, proto)
            try:
                self.watch(sock)
                sock.settimeout(self.remaining())
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                sock.settimeout(self.remaining())
                return sock
            except OSError as exc:
                sock.close()
                if isinstance(exc, _DeadlineHit) or self.hit():
                    raise
                last = exc
        raise last or OSError(f"no address for {host}")

    def _resolve(self, host: str, port: int) -> list[tuple]:
        result: list[object] = []

        def run() -> None:
            try:
                result.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
            except OSError as exc:
                result.append(exc)

        thread = threading.Thread(target=run, name="fioprobe-resolve", daemon=True)
        thread.start()
        thread.join(self.remaining())
        if not result:
            raise _DeadlineHit(f"name resolution took longer than {self.seconds:g}s")
        if isinstance(result[0], OSError):
            raise result[0]
        return result[0]  # type: ignore[return-value]


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: object, deadline: _Deadline, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._create_connection = deadline.connect


class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: object, deadline: _Deadline, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._create_connection = deadline.connect


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineHTTPConnection, deadline=self._deadline)
        return self.do_open(connection, req)  # type: ignore[arg-type]


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineHTTPSConnection, deadline=self._deadline)
        return self.do_open(connection, req, context=self._tls)  # type: ignore[arg-type]


class _RefuseRedirects(urllib.request.BaseHandler):
    """Every 3xx ends the request as an HTTPError: no redirect is ever followed."""

    def refuse(
        self,
        req: urllib.request.Request,
        fp: object,
        code: int,
        msg: str,
        headers: object,
    ) -> None:
        raise urllib.error.HTTPError(req.full_url, code, msg, headers, fp)  # type: ignore[arg-type]


for _code in range(300, 400):
    setattr(_RefuseRedirects, f"http_error_{_code}", _RefuseRedirects.refuse)
del _code


def _opener(deadline: _Deadline, context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """urllib's opener with only what a Pushgateway needs: proxies from the environment,
    deadline-bound connections, errors as exceptions, and no redirect handling at all."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        _HTTPHandler(deadline),
        _HTTPSHandler(deadline, context),
        urllib.request.HTTPDefaultErrorHandler(),
        _RefuseRedirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _read_body(answer: http.client.HTTPResponse, limit: int) -> bytes:
    """The whole body, at most `limit` bytes; a body that stops short of its announced length
    is an IncompleteRead (http.client's read(n) alone returns what came)."""
    length = answer.length  # http.client's reading of Content-Length (None if absent/invalid)
    if length is not None and length > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:  # each pass adds at least one byte or ends: at most limit + 1 passes
        try:
            chunk = answer.read(min(1024 * 1024, limit + 1 - size))
        except ValueError:  # http.client's answer to a chunk size that is not hex
            raise http.client.HTTPException("invalid chunked encoding") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise _TooLarge
    body = b"".join(chunks)
    if length is not None and size < length:
        raise http.client.IncompleteRead(body, length - size)
    return body


# --- validation of settings ---------------------------------------------------------------


def _check_url(url: str) -> None:
    _check_no_credentials(url)
    shown = redact(url)
    scheme, separator, _ = url.partition("://")
    if not separator or scheme.lower() not in ("http", "https"):
        raise TransportConfigError(f"Pushgateway URL {shown} must start with http:// or https://")
    if "?" in url or "#" in url:
        raise TransportConfigError(
            f"Pushgateway URL {shown} must be a base URL, without a query or fragment"
        )
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise TransportConfigError(f"Pushgateway URL {shown} has an invalid port") from None
    if not parts.hostname:
        raise TransportConfigError(f"Pushgateway URL {shown} has no host")


def _check_no_credentials(url: str) -> None:
    if "@" in url:
        raise TransportConfigError(
            f"Pushgateway URL {redact(url)} holds credentials; give them with "
            f"--username-file/--password-file or {ENV_USERNAME}/{ENV_PASSWORD} (or "
            "pushgateway.username_file/password_file in the configuration), never in the URL"
        )


def _check_number(name: str, value: object, *, minimum: float, inclusive: bool) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value >= minimum if inclusive else value > minimum)
    )
    if not ok:
        bound = f"{minimum:g} or more" if inclusive else f"above {minimum:g}"
        shown = f"{value:g}" if isinstance(value, int | float) else repr(value)
        raise TransportConfigError(
            f"Pushgateway {name} must be a finite number of seconds {bound}, got {shown}"
        )


def _read_secret(path: str) -> str:
    """A credential file's text, stripped. Its content is never shown in a message."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_SECRET_FILE_LIMIT_BYTES + 1)
    except OSError as exc:
        raise TransportConfigError(
            f"cannot read credential file {path}: {_os_problem(exc)}"
        ) from None
    if len(raw) > _SECRET_FILE_LIMIT_BYTES:
        raise TransportConfigError(
            f"credential file {path} is larger than {_size(_SECRET_FILE_LIMIT_BYTES)}: "
            "not a username or password"
        )
    try:
        return raw.decode("utf-8-sig").strip()
    except UnicodeDecodeError as exc:
        raise TransportConfigError(
            f"credential file {path} is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


# --- messages -----------------------------------------------------------------------------


def _os_problem(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _size(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    return f"{limit // 1024} KiB"


def _http_problem(exc: urllib.error.HTTPError) -> str:
    hint = {
        401: " (credentials missing or wrong)",
        403: " (credentials not allowed to push)",
    }.get(exc.code, "")
    body = ""
    with contextlib.suppress(Exception):  # the body is a nicety for the message only
        body = printable(exc.read(_REFUSAL_BODY_BYTES).decode("utf-8", errors="replace"), 300)
    reason = printable(str(exc.reason or ""), 60)
    status = f"HTTP {exc.code}" + (f" {reason}" if reason else "")
    return status + hint + (f": {body}" if body else "")


# --- operations ---------------------------------------------------------------------------


def push(
    transport: Transport,
    grouping_key: dict[str, str],
    registry: CollectorRegistry,
    *,
    replace: bool = True,
) -> None:
    """PUT the registry's families as the whole group (replacing its previous push), or,
    with `replace=False`, POST them: only the metrics of the same names are replaced, the
    rest of the group (its counters) stays as it is."""
    send = push_to_gateway if replace else pushadd_to_gateway
    transport.retrying(
        "push",
        lambda: send(
            transport.url,
            job=JOB,
            registry=registry,
            grouping_key=grouping_key,
            timeout=transport.timeout_seconds,
            handler=transport.handler,
        ),
    )


def delete_group(transport: Transport, grouping_key: dict[str, str]) -> None:
    """DELETE the group: the Pushgateway forgets it and Prometheus stops seeing it."""
    transport.retrying(
        "delete",
        lambda: delete_from_gateway(
            transport.url,
            job=JOB,
            grouping_key=grouping_key,
            timeout=transport.timeout_seconds,
            handler=transport.handler,
        ),
    )


class _Shape(Exception):
    """The answer is not shaped as a Pushgateway's: something else answered."""


def list_groups(transport: Transport) -> list[dict[str, object]]:
    """Every group the Pushgateway holds, as its /api/v1/metrics JSON entries.

    The answer's outline is checked (a list of objects, each with labels that map strings to
    strings); the families inside a group are checked by whoever reads them (`read_group`).
    """
    answer = transport.retrying(
        "read back", lambda: transport._get(METRICS_API, READ_BACK_LIMIT_BYTES)
    )
    where = f"{transport.shown_url}{METRICS_API}"
    try:
        try:
            data = json.loads(answer.body.decode("utf-8"))  # never json's UTF-16/32 guess
        except RecursionError:
            raise _Shape("its JSON is nested too deeply") from None
        except ValueError as exc:
            kind = printable(answer.content_type, 60) or "no content type"
            raise _Shape(f"not JSON ({kind}): {printable(str(exc), 120)}") from None
        return _groups(data)
    except _Shape as exc:
        raise transport.error(f"read back: {where} is not a Pushgateway answer: {exc}") from None


def _groups(data: object) -> list[dict[str, object]]:
    if not isinstance(data, dict):
        raise _Shape("the answer is not a JSON object")
    status = data.get("status", "success")
    if status != "success":
        raise _Shape(f"status is {_show(status)}, not 'success'")
    groups = data.get("data")
    if not isinstance(groups, list):
        raise _Shape("'data' is not a list")
    for index, group in enumerate(groups):
        if not isinstance(group, dict):
            raise _Shape(f"group {index} is not an object")
        if not _string_map(group.get("labels")):
            raise _Shape(f"group {index}: its labels are not a map of strings")
    return groups


@dataclass(frozen=True, slots=True)
class ReadBack:
    """One group as the Pushgateway holds it, reduced to what fioprobe can trust."""

    #: What can be trusted; histograms with another layout are dropped.
    totals: GroupTotals
    #: The group's push_time_seconds (the gateway's clock), if present.
    push_time: float | None
    #: Label "writer" of fioprobe_writer_info, if present.
    writer: str | None
    #: fioprobe_push_id and fioprobe_push_basis_id, if present and whole numbers.
    push_id: int | None
    basis_id: int | None
    #: Human-readable notes of what was not trusted and why.
    dropped: tuple[str, ...]


def read_group(transport: Transport, grouping_key: dict[str, str]) -> ReadBack | None:
    """This group as last pushed, or None if the Pushgateway has no such group.

    The group is the one whose labels are exactly {"job": "fioprobe", **grouping_key}.
    What is kept must be something fioprobe could have pushed: counters are finite whole
    numbers from 0 up to (not including) 2**53, a latency histogram has exactly the
    contract's bucket bounds (compared as numbers), whole non-decreasing cumulative counts, a
    +Inf bucket equal to its count and a finite sum of at least 0. A counter that fails is
    counted from 0 again and a histogram that fails is dropped (its series start again from
    0: a counter reset, which rate() handles), each with a note in `dropped`; a value that
    is corrupt could never be removed from the totals again, a reset heals at once.
    An answer that is not shaped as a Pushgateway's is a PushError.
    """
    wanted = {"job": JOB, **grouping_key}
    for group in list_groups(transport):
        if group["labels"] == wanted:
            try:
                read_back = _read_back(group)
            except _Shape as exc:
                raise transport.error(
                    f"read back: {transport.shown_url}{METRICS_API} is not a Pushgateway "
                    f"answer: group {_show(wanted, 200)}: {exc}"
                ) from None
            notes = tuple(transport.scrub(note) for note in read_back.dropped)
            return ReadBack(
                read_back.totals,
                read_back.push_time,
                read_back.writer,
                read_back.push_id,
                read_back.basis_id,
                notes,
            )
    return None


def read_totals(transport: Transport, grouping_key: dict[str, str]) -> GroupTotals | None:
    """The trusted cumulative totals of this group, or None if the group is absent."""
    read_back = read_group(transport, grouping_key)
    return None if read_back is None else read_back.totals


def _read_back(group: dict[str, object]) -> ReadBack:
    notes: list[str] = []
    runs, failures, read_bytes, written_bytes = (_counter(group, name, notes) for name in COUNTERS)
    totals = GroupTotals(
        runs_total=runs,
        failures_total=failures,
        read_bytes_total=read_bytes,
        written_bytes_total=written_bytes,
        last_success_timestamp=_timestamp(group, LAST_SUCCESS, notes),
    )
    for op in EXPORTED_OPS:
        histogram = _histogram(group, f"fioprobe_{op}_latency_seconds", notes)
        if histogram is not None:
            totals.histograms[op] = histogram
    push_time = _timestamp(group, PUSH_TIME, notes)
    writer = None
    writer_metric = _single(group, WRITER_INFO, notes)
    if writer_metric is not None:
        writer = writer_metric.get("labels", {}).get("writer")  # type: ignore[union-attr]
    push_id, basis_id = (_identity(group, name, notes) for name in PUSH_IDS)
    return ReadBack(totals, push_time, writer, push_id, basis_id, tuple(notes))


def _identity(group: dict[str, object], name: str, notes: list[str]) -> int | None:
    """A push identity: a whole number from 1 below 2**53 (0 and anything else: none)."""
    metric = _single(group, name, notes)
    if metric is None or "value" not in metric:
        return None
    value = _number(metric["value"], f"{name}: value")
    if _count_problem(value) is not None or value == 0:
        return None
    return int(value)


def _single(group: dict[str, object], name: str, notes: list[str]) -> dict[str, object] | None:
    """The one series of family `name`, None when absent (noted when there are several)."""
    family = group.get(name)
    if family is None:
        return None
    if not isinstance(family, dict):
        raise _Shape(f"{name} is not an object")
    metrics = family.get("metrics")
    if not isinstance(metrics, list):
        raise _Shape(f"{name}: 'metrics' is not a list")
    for index, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            raise _Shape(f"{name}: metric {index} is not an object")
        if not _string_map(metric.get("labels", {})):
            raise _Shape(f"{name}: metric {index}: its labels are not a map of strings")
    if len(metrics) != 1:
        if metrics:
            notes.append(f"{name}: {len(metrics)} series where fioprobe pushes one; not used")
        return None
    return metrics[0]


def _counter(group: dict[str, object], name: str, notes: list[str]) -> int:
    metric = _single(group, name, notes)
    if metric is None:
        return 0
    if "value" not in metric:
        notes.append(f"{name}: no value; counted from 0")
        return 0
    value = _number(metric["value"], f"{name}: value")
    problem = _count_problem(value)
    if problem:
        notes.append(f"{name}: {_show(metric['value'])} {problem}; counted from 0")
        return 0
    return int(value)


def _count_problem(value: float) -> str | None:
    """Why `value` is not a count fioprobe could have pushed, or None if it is one."""
    if not math.isfinite(value):
        return "is not finite"
    if value < 0:
        return "is negative"
    if not value.is_integer():
        return "is not a whole number"
    if value >= COUNT_LIMIT:
        return "is 2**53 or more, beyond exact counting"
    return None


def _timestamp(group: dict[str, object], name: str, notes: list[str]) -> float | None:
    metric = _single(group, name, notes)
    if metric is None or "value" not in metric:
        return None
    value = _number(metric["value"], f"{name}: value")
    if not math.isfinite(value) or value <= 0:
        notes.append(f"{name}: {_show(metric['value'])} is not a time; not used")
        return None
    return value


def _histogram(group: dict[str, object], name: str, notes: list[str]) -> HistogramTotals | None:
    metric = _single(group, name, notes)
    if metric is None:
        return None
    problem = _histogram_problem(group, name, metric)
    if isinstance(problem, str):
        notes.append(f"{name}: {problem}; dropped, its series start again from 0")
        return None
    return problem


def _histogram_problem(
    group: dict[str, object], name: str, metric: dict[str, object]
) -> HistogramTotals | str:
    """The histogram's totals, or why they cannot be trusted."""
    kind = group[name].get("type", "HISTOGRAM")  # type: ignore[union-attr]
    if kind != "HISTOGRAM":
        return f"type is {_show(kind)}, not HISTOGRAM"
    buckets = metric.get("buckets")
    if buckets is None:
        return "no buckets"
    if not isinstance(buckets, dict):
        raise _Shape(f"{name}: 'buckets' is not an object")
    bounds = sorted(
        (_number(key, f"{name}: bucket bound"), _number(raw, f"{name}: bucket {_show(key)}"))
        for key, raw in buckets.items()
    )
    found = [bound for bound, _ in bounds]
    if len(found) != BUCKET_COUNT or set(found) != set(BUCKET_BOUNDS_SECONDS):
        shown = ", ".join(map(le_label, found[:8])) + (", ..." if len(found) > 8 else "")
        return (
            f"bucket bounds are not fioprobe's {BUCKET_COUNT} (found {len(found)}: "
            f"{shown or 'none'})"
        )
    cumulative = []
    previous = 0
    for bound, value in bounds:
        problem = _count_problem(value)
        if problem:
            return f"bucket le={le_label(bound)} count {value:g} {problem}"
        if value < previous:
            return f"cumulative count falls from {previous} to {value:g} at le={le_label(bound)}"
        previous = int(value)
        cumulative.append(previous)
    if "count" in metric:
        count = _number(metric["count"], f"{name}: count")
        if count != cumulative[-1]:
            return f"+Inf bucket {cumulative[-1]} differs from count {count:g}"
    if "sum" not in metric:
        return "no sum"
    total = _number(metric["sum"], f"{name}: sum")
    if not math.isfinite(total) or total < 0:
        return f"sum {total:g} is not a finite number of seconds of at least 0"
    counts = [cumulative[0]] + [
        cumulative[index] - cumulative[index - 1] for index in range(1, BUCKET_COUNT)
    ]
    return HistogramTotals(counts, total)


#: How the Pushgateway writes a number (Go's strconv formatting): no spaces, underscores or
#: spelled-out names that float() would also accept.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN")


def _number(text: object, what: str) -> float:
    if not isinstance(text, str) or len(text) > 64 or not _NUMBER.fullmatch(text):
        raise _Shape(f"{what} is not a number in a string: {_show(text)}")
    return float(text)


def _string_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    )


def _show(value: object, limit: int = 40) -> str:
    """A value from the answer, short and on one line, for a message."""
    return printable(repr(value), limit)
