"""The stream's /metrics, served so that no client can blind it.

Why not prometheus_client's start_http_server: it starts a thread per connection, with no
deadline for the request and no cap. About 2,000 idle connections took the stream past its
pod's 128 MiB limit (the kernel killed it: the disk's watchdog gone), and with few
descriptors left every scrape timed out while the accept loop spun. Anyone who can reach the
port can do that: not every network plugin enforces NetworkPolicy.

Here one thread runs one event loop, so a connection costs a socket and a few hundred bytes,
never a thread:
- connections that have not sent a whole request yet are at most MAX_WAITING; one more closes
  the one that has waited longest in silence (nothing received, nothing unread in its
  socket), once it has been silent for SILENT_GRACE_SECONDS: idle connections make room. A
  burst may pass MAX_WAITING up to a hard cap below the descriptor limit; there the
  longest-waiting one past the grace goes even if it sent part of a request (a byte at a
  time), and failing that a silent one however young. A client whose request has arrived,
  read or still unread in its socket, is never closed for another: Prometheus and the kubelet
  send theirs as they connect, so a flood of silent connections, however fast, cannot turn
  them away (closing the newcomer at the hard cap did: a flood that reopened connections
  faster than the grace turned away one scrape in four). What still can: connections that
  each send a byte, opened faster than the hard cap per grace (about 2,000 a second), keep
  every waiting one young and not silent, and the newcomer is closed;
- a request must arrive whole within REQUEST_DEADLINE_SECONDS and fit in MAX_REQUEST_BYTES;
- responses being sent are at most MAX_SENDING, each taken within RESPONSE_DEADLINE_SECONDS;
  one more closes the one that has been sending longest (a slow reader, not Prometheus,
  which takes the page in milliseconds);
- the exposition is rendered at most once per RENDER_SECONDS and shared by every request in
  that time, so N scrapes cost one rendering.
The kubelet's probes and Prometheus send their request as soon as they connect: a flood of
idle or slow clients delays them by one turn of the loop. Every response closes its
connection (`Connection: close`), so no connection outlives its request.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import resource
import socket
import sys
import termios
import threading
import time
from collections.abc import Callable

MAX_WAITING = 128
HARD_MAX_WAITING = 1024
#: asyncio accepts up to this many connections in one go before any is admitted.
ACCEPT_BATCH = 100
BACKLOG = 512
SILENT_GRACE_SECONDS = 0.5
MAX_SENDING = 64
REQUEST_DEADLINE_SECONDS = 5.0
RESPONSE_DEADLINE_SECONDS = 10.0
MAX_REQUEST_BYTES = 8192
RENDER_SECONDS = 1.0
#: The one path served; the kubelet's liveness and readiness probes use it too.
METRICS_PATH = "/metrics"


class _Client(asyncio.Protocol):
    """One connection: its request read as it comes, its response written, its deadlines."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server
        self.since = time.monotonic()
        self.request = bytearray()
        self.sending = False
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    @property
    def silent(self) -> bool:
        """Nothing received, and nothing waiting in the socket to be read: a connection
        accepted in the same burst as hundreds of others holds its request unread until the
        loop comes round to it, and is not silent."""
        if self.request or self.transport is None:
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        try:
            pending = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return True  # closed under us: nothing will be read from it
        return int.from_bytes(pending, sys.byteorder) == 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._deadline(REQUEST_DEADLINE_SECONDS)
        self.server.admit(self)

    def data_received(self, data: bytes) -> None:
        if self.sending:
            return  # a second request on the same connection: not served, it closes
        searched = max(0, len(self.request) - 3)
        self.request += data
        end = _end_of_head(self.request, searched)
        if end >= 0:
            self.sending = True
            self._deadline(RESPONSE_DEADLINE_SECONDS)
            self.server.respond(self, bytes(self.request[:end]))
        elif len(self.request) > MAX_REQUEST_BYTES:
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.server.forget(self)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _deadline(self, seconds: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(seconds, self.abort)


class MetricsServer:
    """`render()` (the exposition's bytes) over HTTP on one socket, from a thread of its own."""

    def __init__(self, render: Callable[[], bytes], content_type: str) -> None:
        self._render = render
        self._content_type = content_type
        self._rendered: tuple[float, bytes] | None = None
        self._waiting: dict[_Client, None] = {}  # in arrival order
        self._sending: list[_Client] = []
        # The descriptors connections may take: the limit less the process's own files, the
        # responses being sent and one accept batch of asyncio (it accepts up to 100 before
        # any is admitted). Waiting connections are kept to MAX_WAITING, and may pass it
        # during a burst of connects up to the hard cap, both within that room.
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        room = max(8, soft - MAX_SENDING - 64 - ACCEPT_BATCH)
        self._soft_cap = min(MAX_WAITING, room)
        self._hard_cap = min(HARD_MAX_WAITING, room)
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        #: How many times the exposition was rendered (tests read it).
        self.renders = 0

    def listen(self, host: str, port: int) -> int:
        """Bind and listen (an OSError if it cannot); the port bound. Every address ("" or
        "::") is IPv6 and IPv4 alike where the host has both (dual-stack and IPv6-only
        clusters), else IPv4's."""
        every = host in ("", "::") and socket.has_dualstack_ipv6()
        if every:
            self._socket = socket.create_server(
                ("::", port), family=socket.AF_INET6, backlog=BACKLOG, dualstack_ipv6=True
            )
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._socket = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self._socket.setblocking(False)
        port_bound: int = self._socket.getsockname()[1]
        return port_bound

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metrics-http", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise OSError("the /metrics server did not start within 10 s")

    def stop(self, timeout: float = 2.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    # --- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        assert self._socket is not None, "listen() first"
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await self._loop.create_server(
            lambda: _Client(self), sock=self._socket, backlog=BACKLOG
        )
        self._ready.set()
        async with server:
            await self._stop.wait()
            for client in [*self._waiting, *self._sending]:
                client.abort()

    def admit(self, client: _Client) -> None:
        """A new connection. Over MAX_WAITING, the longest-waiting connection that has been
        silent (nothing received, nothing unread in its socket) for SILENT_GRACE_SECONDS is
        closed. At the hard cap, failing that, the longest-waiting one past the grace that has
        sent part of a request (a byte at a time), then the longest-waiting silent one however
        young, then the newcomer. A client whose request has arrived is never closed for
        another, read or not: under a flood of silent connections, Prometheus and the kubelet,
        which send theirs as they connect, are always let in. `_waiting` is in arrival order."""
        if len(self._waiting) >= self._soft_cap:
            victim = self._victim(at_hard_cap=len(self._waiting) >= self._hard_cap)
            if victim is None and len(self._waiting) >= self._hard_cap:
                victim = client
            if victim is client:
                client.abort()
                return
            if victim is not None:
                del self._waiting[victim]
                victim.abort()
        self._waiting[client] = None

    def _victim(self, at_hard_cap: bool) -> _Client | None:
        """The waiting connection to close for a newcomer, if any, in admit's order."""
        grace = time.monotonic() - SILENT_GRACE_SECONDS
        partial: _Client | None = None
        for waiting in self._waiting:
            if waiting.since <= grace:
                if waiting.silent:
                    return waiting
                if waiting.request:  # part of a request; one whole but unread is never taken
                    partial = partial or waiting
            elif not at_hard_cap:
                return None  # in arrival order: none after it is past the grace either
            elif partial is not None or waiting.silent:
                return partial or waiting
        return partial if at_hard_cap else None

    def respond(self, client: _Client, head: bytes) -> None:
        """A whole request: its response written, room made among the responses being sent
        (the one sending longest goes: a slow reader)."""
        self._waiting.pop(client, None)
        if len(self._sending) >= MAX_SENDING:
            victim = min(self._sending, key=lambda c: c.since)
            self._sending.remove(victim)
            victim.abort()
        client.since = time.monotonic()
        self._sending.append(client)
        assert client.transport is not None
        client.transport.write(self._response(head))
        client.transport.close()  # once the response is taken (or the deadline aborts it)

    def forget(self, client: _Client) -> None:
        self._waiting.pop(client, None)
        if client in self._sending:
            self._sending.remove(client)

    def _response(self, head: bytes) -> bytes:
        request_line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _plain(400, "Bad Request", "not an HTTP request\n")
        method, target = parts[0], parts[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return _plain(405, "Method Not Allowed", "GET or HEAD only\n")
        if target != METRICS_PATH:
            return _plain(404, "Not Found", f"only {METRICS_PATH}\n")
        try:
            body = self._exposition()
        except Exception as exc:  # a scrape gets an answer, never a reset
            return _plain(
                500, "Internal Server Error", f"the metrics could not be rendered: {exc}\n"
            )
        head_out = _head(200, "OK", self._content_type, len(body))
        return head_out if method == "HEAD" else head_out + body

    def _exposition(self) -> bytes:
        now = time.monotonic()
        if self._rendered is None or now - self._rendered[0] >= RENDER_SECONDS:
            self._rendered = (now, self._render())
            self.renders += 1
        return self._rendered[1]


def _end_of_head(request: bytearray, start: int) -> int:
    """Where the request's head ends (CRLF CRLF, or LF LF as some clients send), else -1."""
    ends = [i for i in (request.find(b"\r\n\r\n", start), request.find(b"\n\n", start)) if i >= 0]
    return min(ends) if ends else -1


def _head(status: int, reason: str, content_type: str, length: int) -> bytes:
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")


def _plain(status: int, reason: str, text: str) -> bytes:
    body = text.encode()
    return _head(status, reason, "text/plain; charset=utf-8", len(body)) + body
