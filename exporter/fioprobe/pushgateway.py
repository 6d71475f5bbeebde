"""Talking to the Pushgateway: push a group (PUT), read a group's totals back, delete a group.

Credentials never come from the command line only: the username and password are read from
environment variables or mounted files (a Kubernetes Secret), the CA and client certificate
from files. One `Transport` carries them for every request.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.exposition import delete_from_gateway

from .histogram import BUCKET_COUNT
from .metrics import EXPORTED_OPS, LATENCY_BUCKETS_SECONDS
from .state import GroupTotals, HistogramTotals

if TYPE_CHECKING:  # config imports yaml; a push must not pay for it
    from .config import PushgatewayConfig

JOB = "fioprobe"
ENV_USERNAME = "FIOPROBE_PUSHGATEWAY_USERNAME"
ENV_PASSWORD = "FIOPROBE_PUSHGATEWAY_PASSWORD"


class PushError(RuntimeError):
    """The Pushgateway could not be reached or refused the request."""


@dataclass(frozen=True, slots=True)
class Transport:
    """How to reach the Pushgateway: URL, credentials, TLS, timeout and retries."""

    url: str
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout_seconds: float = 10.0
    attempts: int = 3
    backoff_seconds: float = 0.5

    @classmethod
    def from_sources(
        cls,
        url: str,
        *,
        username_file: str | None = None,
        password_file: str | None = None,
        **options: object,
    ) -> Transport:
        """Credentials from files when given, else from the environment."""
        username = _read_secret(username_file) if username_file else os.environ.get(ENV_USERNAME)
        password = _read_secret(password_file) if password_file else os.environ.get(ENV_PASSWORD)
        if (username is None) != (password is None):
            raise PushError("basic auth needs both a username and a password")
        if not url.startswith(("http://", "https://")):
            url = "http://" + url
        return cls(url=url.rstrip("/"), username=username, password=password, **options)  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, config: PushgatewayConfig) -> Transport:
        """The Pushgateway of a `fioprobe run` configuration, credentials and TLS included."""
        return cls.from_sources(
            config.url,
            username_file=config.username_file,
            password_file=config.password_file,
            ca_file=config.ca_file,
            cert_file=config.cert_file,
            key_file=config.key_file,
            timeout_seconds=config.timeout_seconds,
            attempts=config.attempts,
        )

    # -- requests ---------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https://"):
            return None
        # Unreadable TLS files are a setup error, not a network one: fail at once, say which.
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

    def _headers(self) -> dict[str, str]:
        if self.username is None:
            return {}
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def handler(
        self, url: str, method: str, timeout: float | None, headers: list, data: bytes
    ) -> Callable[[], None]:
        """prometheus_client push handler: adds auth and TLS to its request."""

        def send() -> None:
            request = urllib.request.Request(url, data=data, method=method)
            for name, value in [*headers, *self._headers().items()]:
                request.add_header(name, value)
            with urllib.request.urlopen(
                request, timeout=timeout, context=self._ssl_context()
            ) as response:
                if response.status >= 400:
                    raise urllib.error.HTTPError(url, response.status, response.reason, {}, None)

        return send

    def get_json(self, path: str) -> object:
        request = urllib.request.Request(self.url + path, headers=self._headers())
        with urllib.request.urlopen(
            request, timeout=self.timeout_seconds, context=self._ssl_context()
        ) as response:
            return json.load(response)

    def retrying(self, what: str, action: Callable[[], object]) -> object:
        """Run `action`, retrying with exponential backoff on network errors and 5xx only.

        A 4xx (bad credentials, bad payload) is final: retrying cannot fix it.
        """
        delay = self.backoff_seconds
        for attempt in range(1, self.attempts + 1):
            try:
                return action()
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or attempt == self.attempts:
                    raise PushError(f"{what}: {self.url} answered {_http_problem(exc)}") from None
            except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
                cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                if isinstance(cause, ssl.SSLCertVerificationError):  # final, like a 4xx
                    raise PushError(
                        f"{what}: TLS certificate of {self.url} is not trusted (certificate "
                        f"verify failed: {cause.verify_message}); give the CA that signed it "
                        "with --ca-file (pushgateway.ca_file in the configuration)"
                    ) from None
                if attempt == self.attempts:
                    reason = getattr(exc, "reason", exc)
                    raise PushError(
                        f"{what}: cannot reach {self.url} after {attempt} attempts: {reason}"
                    ) from None
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")


def _read_secret(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise PushError(f"cannot read credential file {path}: {exc.strerror}") from None


def _os_problem(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _http_problem(exc: urllib.error.HTTPError) -> str:
    hint = {
        401: " (credentials missing or wrong)",
        403: " (credentials not allowed to push)",
    }.get(exc.code, "")
    body = ""
    with contextlib.suppress(Exception):  # the body is a nicety for the message only
        body = exc.read(300).decode("utf-8", errors="replace").strip()
    return f"HTTP {exc.code} {exc.reason}{hint}" + (f": {body}" if body else "")


def push(transport: Transport, grouping_key: dict[str, str], registry: CollectorRegistry) -> None:
    """PUT the registry's families as the whole group (replacing its previous push)."""
    transport.retrying(
        "push",
        lambda: push_to_gateway(
            transport.url,
            job=JOB,
            registry=registry,
            grouping_key=grouping_key,
            timeout=transport.timeout_seconds,
            handler=transport.handler,
        ),
    )


def delete_group(transport: Transport, grouping_key: dict[str, str]) -> None:
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


def list_groups(transport: Transport) -> list[dict[str, object]]:
    """Every group the Pushgateway holds, as its /api/v1/metrics JSON entries."""
    data = transport.retrying("read back", lambda: transport.get_json("/api/v1/metrics"))
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise PushError(f"read back: {transport.url}/api/v1/metrics is not a Pushgateway answer")
    return data["data"]


def read_totals(transport: Transport, grouping_key: dict[str, str]) -> GroupTotals | None:
    """The cumulative totals of this group as last pushed, or None if the group is absent."""
    wanted = {"job": JOB, **grouping_key}
    for group in list_groups(transport):
        labels = group.get("labels")
        if isinstance(labels, dict) and labels == wanted:
            try:
                return _totals_from_group(group)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise PushError(f"read back: group {wanted} is malformed ({exc})") from None
    return None


def _first_metric(group: dict[str, object], name: str) -> dict[str, object] | None:
    family = group.get(name)
    if not isinstance(family, dict) or not family.get("metrics"):
        return None
    return family["metrics"][0]


def _totals_from_group(group: dict[str, object]) -> GroupTotals:
    def counter(name: str) -> int:
        metric = _first_metric(group, name)
        return int(float(metric["value"])) if metric else 0

    totals = GroupTotals(
        runs_total=counter("fioprobe_runs_total"),
        failures_total=counter("fioprobe_failures_total"),
        read_bytes_total=counter("fioprobe_read_bytes_total"),
        written_bytes_total=counter("fioprobe_written_bytes_total"),
    )
    last = _first_metric(group, "fioprobe_last_success_timestamp_seconds")
    if last:
        totals.last_success_timestamp = float(last["value"])
    keys = [f"{le:g}" for le in LATENCY_BUCKETS_SECONDS] + ["+Inf"]
    for op in EXPORTED_OPS:
        metric = _first_metric(group, f"fioprobe_{op}_latency_seconds")
        if not metric:
            continue
        buckets = metric.get("buckets", {})
        cumulative_counts = [int(float(buckets.get(key, 0))) for key in keys]
        counts = [cumulative_counts[0]] + [
            cumulative_counts[i] - cumulative_counts[i - 1] for i in range(1, BUCKET_COUNT)
        ]
        totals.histograms[op] = HistogramTotals(counts, float(metric.get("sum", 0.0)))
    return totals
