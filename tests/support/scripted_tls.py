"""An HTTPS server of the test's own on 127.0.0.1 that answers exactly what a test scripts.

Where the real API server cannot misbehave on demand (a redirect, a body that is not JSON, an
answer that never comes, a watch that never ends), the client's tests talk to this one. It
serves the `support.kubeapi` fixture's server certificate, so the client trusts it exactly as
it trusts the real API server.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Held:
    """An answer's first bytes, after which the server holds the connection open, sending
    nothing more, until it stops (a watch that never ends)."""

    data: bytes


class ScriptedServer:
    """HTTPS on 127.0.0.1 with the kube fixture's server certificate: every request is
    recorded (its head) and answered with `answer(head)`'s bytes; None holds the connection
    open, unanswered, until the server stops, and `Held` after its bytes. `tls=False` never
    even answers the handshake."""

    def __init__(
        self, directory: Path, answer: Callable[[bytes], bytes | Held | None], tls: bool = True
    ) -> None:
        self.heads: list[bytes] = []
        self._answer = answer
        self._context: ssl.SSLContext | None = None
        if tls:
            self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._context.load_cert_chain(directory / "server.crt", directory / "server.key")
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> ScriptedServer:
        self._acceptor.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._acceptor.join(5)
        self._listener.close()
        for thread in self._threads:
            thread.join(5)

    def _accept(self) -> None:
        for _ in range(1000):  # bounded: a test makes a few requests
            if self._stop.is_set():
                return
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, raw: socket.socket) -> None:
        with raw:
            try:
                raw.settimeout(10)
                if self._context is None:
                    self._stop.wait(30)
                    return
                with self._context.wrap_socket(raw, server_side=True) as conn:
                    head = b""
                    while b"\r\n\r\n" not in head and len(head) < 65536:
                        data = conn.recv(4096)
                        if not data:
                            return
                        head += data
                    self.heads.append(head)
                    scripted = self._answer(head)
                    if scripted is None:
                        self._stop.wait(30)
                        return
                    if isinstance(scripted, Held):
                        conn.sendall(scripted.data)
                        self._stop.wait(30)
                        return
                    conn.sendall(scripted)
            except OSError:
                pass  # the client hung up (a deadline) or refused the certificate


def reply(status: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    fields = {"Content-Type": "application/json", "Content-Length": str(len(body)),
              "Connection": "close", **(headers or {})}  # fmt: skip
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode() + b"\r\n" + body
