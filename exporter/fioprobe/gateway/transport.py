"""The hardened HTTP client fioprobe reaches a Pushgateway with; it knows no metric.

Credentials never come from the command line itself: the username and password are read from
environment variables or mounted files (a Kubernetes Secret), the CA and client certificate
from files. One `Transport` carries them for every request.

Every request is one exchange with a hard deadline and without redirects. A Pushgateway never
redirects, so a 3xx is either a misconfiguration or someone trying to collect the basic-auth
header; following it would send the credentials to whatever origin it names. A server that
answers slowly, or never finishes, must not hold a CronJob past its schedule, so the deadline
bounds the whole exchange, not each socket read (`fioprobe.exchange`).

This module is only the way there and back: what is pushed is `fioprobe.gateway.api`'s, what
an answer means is `fioprobe.gateway.readback`'s, so each can be read and tested without the
other.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import math
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TypedDict, TypeVar, Unpack

from fioprobe.errors import ExitCode, FioprobeError, UsageError
from fioprobe.exchange import Deadline, DeadlineHit, TooLarge, read_body
from fioprobe.gateway import defaults as push_defaults
from fioprobe.gateway.deadline import DeadlineHTTPHandler, DeadlineHTTPSHandler
from fioprobe.gateway.settings import PushgatewayConfig
from fioprobe.text import printable

T = TypeVar("T")

ENV_USERNAME = "FIOPROBE_PUSHGATEWAY_USERNAME"
ENV_PASSWORD = "FIOPROBE_PUSHGATEWAY_PASSWORD"

#: The most of a refusal's body read for the error message.
_REFUSAL_BODY_BYTES = 4096
#: The most one read of an answer's body asks for; the limit is checked after each.
_READ_BYTES = 1024 * 1024
#: A credential file larger than this is not a credential (a wrong path, /dev/zero).
_SECRET_FILE_LIMIT_BYTES = 64 * 1024


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


class TransportOptions(TypedDict, total=False):
    """What `Transport.from_sources` hands on to the Transport as it is."""

    ca_file: str | None
    cert_file: str | None
    key_file: str | None
    timeout_seconds: float
    attempts: int
    backoff_seconds: float


@dataclass(frozen=True, slots=True)
class Transport:
    """How to reach the Pushgateway: URL, credentials, TLS, deadline and retries.

    Time bound: one attempt (name resolution, connect, TLS handshake, sending, status line,
    headers and the whole body together) ends after at most `timeout_seconds`; attempts are
    separated by `backoff_seconds`, doubled after each. One call therefore returns within
    `attempts * timeout_seconds + backoff_seconds * (2 ** (attempts - 1) - 1)`, plus the CPU
    time to parse an answer already received (bounded by the body limit of the request, for a
    read-back `api.READ_BACK_LIMIT_BYTES`). With the defaults (10 s, 3 attempts, 0.5 s) that
    is 31.5 s.

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
        attempts: object = self.attempts  # from a configuration file: any type at all
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
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
        **options: Unpack[TransportOptions],
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
        return cls(url=url.rstrip("/"), username=username, password=password, **options)

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

    def get(self, path: str, limit: int) -> _Answer:
        """GET `path` below the URL: one exchange, at most `limit` body bytes kept."""
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
        deadline = Deadline(self.timeout_seconds)
        try:
            with _opener(deadline, context).open(request, timeout=self.timeout_seconds) as answer:
                content_type = answer.headers.get("Content-Type", "")
                body = (
                    read_body(answer, limit, strict=True, read_bytes=_READ_BYTES) if limit else b""
                )
                return _Answer(answer.status, content_type, body)
        except urllib.error.HTTPError as exc:
            raise self._refusal(exc) from None
        except TooLarge:
            raise _Final(
                f"the answer of {redact(url)} is larger than {_size(limit)}, more than fioprobe "
                "reads: not a Pushgateway answer fioprobe can use"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if deadline.hit() or isinstance(cause, DeadlineHit):
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


class RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """An opener's redirect handler that follows no redirect: every 3xx ends the request.

    urllib would send the Authorization header on to wherever the Location points, another
    origin included, and turn a POST into a GET of that page whose 200 looks like success.
    The request ends with the HTTPError urllib makes of any refused answer, or with what
    `refusal` makes of that HTTPError. A subclass of urllib's own redirect handler only so
    that `urllib.request.build_opener` puts it in that one's place instead of beside it.
    """

    def __init__(
        self, refusal: Callable[[urllib.error.HTTPError], Exception] | None = None
    ) -> None:
        super().__init__()
        self._refusal = refusal

    def refuse(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> None:
        error = urllib.error.HTTPError(req.full_url, code, msg, headers, fp)
        raise error if self._refusal is None else self._refusal(error)


for _code in range(300, 400):
    setattr(RefuseRedirects, f"http_error_{_code}", RefuseRedirects.refuse)
del _code


def _opener(deadline: Deadline, context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    """urllib's opener with only what a Pushgateway needs: proxies from the environment,
    deadline-bound connections, errors as exceptions, and no redirect handling at all."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        DeadlineHTTPHandler(deadline),
        DeadlineHTTPSHandler(deadline, context),
        urllib.request.HTTPDefaultErrorHandler(),
        RefuseRedirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


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
