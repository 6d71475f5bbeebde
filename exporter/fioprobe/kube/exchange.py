"""One exchange with the Kubernetes API server under one deadline, its body bounded.

Socket timeouts bound each blocking call, not their sum: a watchdog (`Watchdog`) shuts the
connection's socket down at the deadline, so name resolution, connect, TLS, request and the
whole answer fit in it (`client` says why the API gets these rules). `read_body` reads at
most the limit a caller gives, so an answer cannot grow the process without bound.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    location: str
    body: bytes


class TooLarge(Exception):
    """The answer is larger than the caller's limit."""


class Expired(TimeoutError):
    """The deadline passed before a step of the exchange could start."""


#: One answer of socket.getaddrinfo.
_AddressInfo: TypeAlias = tuple[
    socket.AddressFamily,
    socket.SocketKind,
    int,
    str,
    tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes],
]


class Watchdog:
    """The end of one exchange, enforced: at the deadline a timer shuts the connection's
    socket down, so every blocked or later read and write returns at once, whatever
    http.client or ssl was doing. The technique of `fioprobe.gateway.deadline.Deadline`
    (which this stage cannot import); it holds a duplicate of the socket's descriptor, so it
    never shuts down a descriptor number that was closed and reused meanwhile."""

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
            raise Expired(f"no answer within {self.seconds:g}s")
        return left

    def _fire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._expired = True
            for sock in self._watched:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

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
        """socket.create_connection within the deadline, the socket under the watchdog."""
        host, port = address
        last: OSError | None = None
        for family, kind, proto, _, sockaddr in self._resolve(host, port):
            sock = socket.socket(family, kind, proto)
            try:
                duplicate = sock.dup()
                with self._lock:
                    if self._closed or self._expired:
                        duplicate.close()
                        raise Expired(f"no answer within {self.seconds:g}s")
                    self._watched.append(duplicate)
                sock.settimeout(self.remaining())
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                sock.settimeout(self.remaining())
                return sock
            except OSError as exc:
                sock.close()
                if isinstance(exc, Expired) or self.hit():
                    raise
                last = exc
        raise last or OSError(f"no address for {host}")

    def _resolve(self, host: str, port: int) -> Sequence[_AddressInfo]:
        """The addresses of `host`; an IP address (a pod's case) needs no resolver. A name
        is resolved in a helper thread given up on at the deadline (getaddrinfo cannot be
        interrupted; the thread ends when the resolver's own timeout does)."""
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(host)
            if ip.version == 6:
                return [(socket.AF_INET6, socket.SOCK_STREAM, 0, "", (host, port, 0, 0))]
            return [(socket.AF_INET, socket.SOCK_STREAM, 0, "", (host, port))]
        result: list[Sequence[_AddressInfo] | OSError] = []

        def run() -> None:
            try:
                result.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
            except OSError as exc:
                result.append(exc)

        thread = threading.Thread(target=run, name="fioprobe-kube-resolve", daemon=True)
        thread.start()
        thread.join(self.remaining())
        if not result:
            raise Expired(f"name resolution took longer than {self.seconds:g}s")
        found = result[0]
        if isinstance(found, OSError):
            raise found
        return found


class Connection(http.client.HTTPSConnection):
    """An HTTPS connection whose socket is made and watched by one `Watchdog`."""

    def __init__(
        self, host: str, port: int, *, context: ssl.SSLContext, watchdog: Watchdog
    ) -> None:
        super().__init__(host, port, timeout=watchdog.seconds, context=context)
        self._create_connection = watchdog.connect


def read_body(answer: http.client.HTTPResponse, limit: int, strict: bool) -> bytes:
    """The body, at most `limit` bytes. `strict` (the answer to use): more is TooLarge, and
    a body that stops short of its announced length is an IncompleteRead. Otherwise (a
    refusal, read for its message) what fits is kept."""
    length = answer.length  # http.client's reading of Content-Length (None if absent)
    if strict and length is not None and length > limit:
        raise TooLarge
    chunks: list[bytes] = []
    size = 0
    while size <= limit:  # each pass adds at least one byte or ends: at most limit + 1 passes
        try:
            chunk = answer.read(min(256 * 1024, limit + 1 - size))
        except ValueError:  # http.client's answer to a chunk size that is not hex
            raise http.client.HTTPException("invalid chunked encoding") from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    body = b"".join(chunks)
    if not strict:
        return body[:limit]
    if size > limit:
        raise TooLarge
    if length is not None and size < length:
        raise http.client.IncompleteRead(body, length - size)
    return body
