"""One deadline for a whole HTTP exchange: name resolution, connect, TLS, request and answer.

A server that answers slowly, or never finishes, must not hold a CronJob past its schedule.
The urllib handlers here tie every connection an opener makes to one `Deadline` that ends the
exchange when it passes. They are the lowest layer of the transport
(`fioprobe.gateway.transport`), kept apart because they know no URL, credential or answer.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
import urllib.request
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


class Deadline:
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
                if isinstance(exc, DeadlineHit) or self.hit():
                    raise
                last = exc
        raise last or OSError(f"no address for {host}")

    def _resolve(self, host: str, port: int) -> Sequence[_AddressInfo]:
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


# urllib chooses the connection's arguments (host, timeout, TLS context); they are handed on
# unchanged to http.client's own constructor, which types them.
class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class DeadlineHTTPHandler(urllib.request.HTTPHandler):
    """urllib's http:// handler whose connections are made and watched by `deadline`."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineHTTPConnection, deadline=self._deadline)
        return self.do_open(connection, req)


class DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    """urllib's https:// handler whose connections are made and watched by `deadline`."""

    def __init__(self, deadline: Deadline, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_DeadlineHTTPSConnection, deadline=self._deadline)
        return self.do_open(connection, req, context=self._tls)
