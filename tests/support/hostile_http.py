"""A misbehaving HTTP server on 127.0.0.1 for client tests: redirects, slow drips, lies.

Raw sockets rather than http.server, so a test says byte by byte what the client receives:
a status line one byte every two seconds, a body shorter than its Content-Length, a body of
many megabytes. Every request is recorded (method, path, headers, body) before the scripted
behaviour answers it, so a test can assert what a client sent and to whom.

Everything is bounded: the server accepts at most `max_connections` connections, reads at most
64 KiB of request head and 16 MiB of request body, and `stop()` (or leaving the `with` block)
ends every drip at once and joins every thread with a timeout.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    #: Header names in lower case.
    headers: dict[str, str]
    body: bytes


class Exchange:
    """One accepted connection: the request it carried and a way to answer it."""

    def __init__(self, conn: socket.socket, request: Request, stopping: threading.Event) -> None:
        self.conn = conn
        self.request = request
        self._stopping = stopping

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def drip(self, data: bytes, interval: float) -> None:
        """One byte every `interval` seconds; ends early when the server stops."""
        for index in range(len(data)):
            self.conn.sendall(data[index : index + 1])
            if self._stopping.wait(interval):
                return

    def stream(self, total: int, chunk: int = 1024 * 1024) -> None:
        """`total` bytes of filler in `chunk`-sized writes (the client may hang up first)."""
        block = b" " * chunk
        sent = 0
        while sent < total and not self._stopping.is_set():
            size = min(chunk, total - sent)
            self.conn.sendall(block[:size])
            sent += size


Behaviour = Callable[[Exchange], None]


class HostileServer:
    """Serve every connection with `behaviour`, in its own thread; record every request."""

    def __init__(self, behaviour: Behaviour, max_connections: int = 50) -> None:
        self.behaviour = behaviour
        self.max_connections = max_connections
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))  # the kernel picks a free port: no race
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="hostile-accept", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HostileServer:
        self._acceptor.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        if self._acceptor.is_alive():
            self._acceptor.join(5)
        self._listener.close()
        for thread in list(self._threads):
            thread.join(5)

    def _accept(self) -> None:
        accepted = 0
        while not self._stopping.is_set() and accepted < self.max_connections:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted += 1
            thread = threading.Thread(
                target=self._serve, args=(conn,), name="hostile-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                request = _read_request(conn)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                self.behaviour(Exchange(conn, request, self._stopping))
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the client hung up (what a deadline does): nothing to answer


def _read_request(conn: socket.socket) -> Request | None:
    head = b""
    while b"\r\n\r\n" not in head:  # each pass adds at least one byte, up to HEAD_LIMIT
        if len(head) > HEAD_LIMIT:
            return None
        data = conn.recv(4096)
        if not data:
            return None
        head += data
    head, _, body = head.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = [*lines[0].split(" "), "", ""][:3]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = min(int(headers.get("content-length", "0") or 0), BODY_LIMIT)
    while len(body) < length:  # each pass adds at least one byte, up to BODY_LIMIT
        data = conn.recv(min(65536, length - len(body)))
        if not data:
            break
        body += data
    return Request(method, path, headers, body)


# --- canned behaviours --------------------------------------------------------------------


def response(
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    reason: str = "Whatever",
) -> bytes:
    fields = {"Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode("latin-1") + b"\r\n" + body


def answer(
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    reason: str = "Whatever",
) -> Behaviour:
    """A complete answer, at once."""
    data = response(status, body, headers, reason)
    return lambda exchange: exchange.send(data)


def json_answer(document: object, status: int = 200) -> Behaviour:
    body = json.dumps(document).encode()
    return answer(status, body, {"Content-Type": "application/json"}, "OK")


def redirect(code: int, location: str) -> Behaviour:
    return answer(code, b"moved\n", {"Location": location}, "Moved")


def truncated(announced: int, sent: int) -> Behaviour:
    """A 200 whose body stops after `sent` of the `announced` bytes, then the close."""
    head = response(200, b"", {"Content-Type": "application/json"}, "OK").replace(
        b"Content-Length: 0", f"Content-Length: {announced}".encode()
    )
    return lambda exchange: exchange.send(head + b"[" * sent)


def drip_head(interval: float) -> Behaviour:
    """The status line and headers, one byte every `interval` seconds."""
    data = response(200, b"{}", {"Content-Type": "application/json"}, "OK")
    return lambda exchange: exchange.drip(data, interval)


def drip_body(interval: float, size: int = 100) -> Behaviour:
    """The head at once, then a `size`-byte body one byte every `interval` seconds."""
    head = response(200, b"", {"Content-Type": "application/json"}, "OK").replace(
        b"Content-Length: 0", f"Content-Length: {size}".encode()
    )

    def behave(exchange: Exchange) -> None:
        exchange.send(head)
        exchange.drip(b" " * size, interval)

    return behave


def huge(total: int, announce: bool) -> Behaviour:
    """A 200 of `total` bytes, its length announced or only ended by the close."""
    length = f"Content-Length: {total}\r\n" if announce else ""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}Connection: close\r\n\r\n"

    def behave(exchange: Exchange) -> None:
        exchange.send(head.encode())
        exchange.stream(total)

    return behave


# --- a faulty front of a real Pushgateway -----------------------------------------------------


def forward(upstream: str, timeout: float = 10.0) -> Behaviour:
    """Relay the request to `upstream` (a real Pushgateway on 127.0.0.1) and its answer back."""
    host, _, port = upstream.removeprefix("http://").rstrip("/").partition(":")

    def behave(exchange: Exchange) -> None:
        request = exchange.request
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
            conn.request(request.method, request.path, body=request.body or None, headers=headers)
            upstream_answer = conn.getresponse()
            body = upstream_answer.read()
            kept = {k: v for k, v in upstream_answer.getheaders() if k.lower() == "content-type"}
            exchange.send(response(upstream_answer.status, body, kept, upstream_answer.reason))
        finally:
            conn.close()

    return behave


_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})


def selective(
    fault: Behaviour, applies: Callable[[Request], bool], otherwise: Behaviour
) -> Behaviour:
    """`fault` for the requests `applies` picks, `otherwise` for the rest."""
    return lambda exchange: (fault if applies(exchange.request) else otherwise)(exchange)
