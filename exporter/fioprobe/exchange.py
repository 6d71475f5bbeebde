"""One HTTP exchange under one deadline, its body bounded: what the Pushgateway's transport
(`fioprobe.gateway.transport`) and the Kubernetes API client (`fioprobe.kube.client`) share.

A server that answers slowly, or never finishes, must not hold a probe past its schedule.
Socket timeouts bound each blocking call, not their sum: a server sending one byte every few
seconds satisfies every recv and never ends. So a `Deadline` shuts the connection's socket
down when it passes, and name resolution, connect, TLS, request, status, headers and body all
fit in it. `read_body` reads at most the limit a caller gives, so an answer cannot grow the
process without bound. What a failure means, and how it is said, is each caller's.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any, TypeAlias

#: One answer of `socket.getaddrinfo`: family, socket type, protocol, canonical name, address.
_AddressInfo: TypeAlias = tuple[
    socket.AddressFamily,
    socket.SocketKind,
    int,
    str,
    tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes],
]


class DeadlineHit(TimeoutError):
    """The deadline passed before a step of the exchange could start or end."""


class TooLarge(Exception):
    """The answer is larger than the caller's limit."""


class Deadline:
    """The end of one exchange, enforced by a watchdog.

    A timer fires at the deadline and shuts the connection down: every blocked or later read
    and write on it returns at once, whatever http.client, ssl or the body reader was doing.
    The watchdog holds its own duplicate of each socket's descriptor, so it can never shut
    down a descriptor number that was closed and reused meanwhile.
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
            raise DeadlineHit(f"no answer within {self.seconds:g}s")
        return left

    def _fire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._expired = True
            for sock in self._watched:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """End the exchange now, from any thread: as if the deadline had passed (a reader
        that no longer wants the rest of a stream)."""
        self._fire()

    def watch(self, sock: socket.socket) -> None:
        duplicate = sock.dup()
        with self._lock:
            if self._closed or self._expired:
                duplicate.close()
                raise DeadlineHit(f"no answer within {self.seconds:g}s")
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
        """socket.create_connection within the deadline, the socket under the watchdog."""
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
                if isinstance(exc, DeadlineHit) or self.hit():
                    raise
                last = exc
        raise last or OSError(f"no address for {host}")

    def _resolve(self, host: str, port: int) -> Sequence[_AddressInfo]:
        """The addresses of `host`. An IP address (the API server's in a pod) needs no
        resolver, but one with a zone (fe80::1%eth0), which only the resolver turns into
        an interface. A name is resolved in a helper thread given up on at the deadline
        (getaddrinfo cannot be interrupted; the thread ends when the resolver's own timeout
        does)."""
        with contextlib.suppress(ValueError):
            ip = ipaddress.ip_address(host)
            if isinstance(ip, ipaddress.IPv4Address):
                return [(socket.AF_INET, socket.SOCK_STREAM, 0, "", (host, port))]
            if ip.scope_id is None:
                return [(socket.AF_INET6, socket.SOCK_STREAM, 0, "", (host, port, 0, 0))]
        result: list[Sequence[_AddressInfo] | OSError] = []

        def run() -> None:
            try:
                result.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
            except OSError as exc:
                result.append(exc)

        thread = threading.Thread(target=run, name="fioprobe-resolve", daemon=True)
        thread.start()
        thread.join(self.remaining())
        if not result:
            raise DeadlineHit(f"name resolution took longer than {self.seconds:g}s")
        found = result[0]
        if isinstance(found, OSError):
            raise found
        return found


# The connection's other arguments (host, port, timeout, TLS context) are handed on unchanged
# to http.client's own constructor, which types them: urllib chooses them for the gateway.
class DeadlineHTTPConnection(http.client.HTTPConnection):
    """An http:// connection whose socket is made and watched by `deadline`."""

    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class DeadlineHTTPSConnection(http.client.HTTPSConnection):
    """An https:// connection whose socket is made and watched by `deadline`."""

    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


def read_body(
    answer: http.client.HTTPResponse, limit: int, *, strict: bool, read_bytes: int
) -> bytes:
    """The body, at most `limit` bytes, read `read_bytes` at most at a time. `strict` (the
    answer to use): more is TooLarge, and a body that stops short of its announced length is
    an IncompleteRead (http.client's read(n) alone returns what came). Otherwise (a refusal,
    read for its message) what fits is kept."""
    length = answer.length  # http.client's reading of Content-Length (None if absent/invalid)
    if strict and length is not None and length > limit:
        raise TooLarge
    chunks: list[bytes] = []
    size = 0
    while size <= limit:  # each pass adds at least one byte or ends: at most limit + 1 passes
        try:
            chunk = answer.read(min(read_bytes, limit + 1 - size))
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
