"""The stream's bounded /metrics server (fioprobe.continuous.http) on its own: what it answers,
the deadlines and caps that keep a client from holding it, and one rendering shared by
concurrent scrapes. The flood against the real stream is tests/continuous/test_continuous_flood.py.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from fioprobe.continuous import http

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture
def server() -> Iterator[tuple[http.MetricsServer, int]]:
    calls = {"n": 0}

    def render() -> bytes:
        calls["n"] += 1
        return b"# HELP x A test.\n# TYPE x gauge\nx 1\n"

    s = http.MetricsServer(render, CONTENT_TYPE)
    port = s.listen("127.0.0.1", 0)
    s.start()
    yield s, port
    s.stop()


def raw(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_metrics_is_served_and_nothing_else(server: tuple[http.MetricsServer, int]) -> None:
    _, port = server
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"] == CONTENT_TYPE
        assert response.read() == b"# HELP x A test.\n# TYPE x gauge\nx 1\n"
    head = raw(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n"), head
    for request, status in [
        (b"GET /other HTTP/1.1\r\n\r\n", b"404"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"hello\r\n\r\n", b"400"),
    ]:
        assert raw(port, request).split(b" ")[1] == status, request


def test_concurrent_scrapes_share_one_rendering(server: tuple[http.MetricsServer, int]) -> None:
    s, port = server
    before = s.renders
    results: list[bytes] = []

    def scrape() -> None:
        results.append(raw(port, b"GET /metrics HTTP/1.1\r\n\r\n"))

    threads = [threading.Thread(target=scrape) for _ in range(16)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(results) == 16 and all(r.startswith(b"HTTP/1.1 200") for r in results)
    # All within one rendering's lifetime (RENDER_SECONDS) unless the machine stalled.
    if time.monotonic() - started < http.RENDER_SECONDS:
        assert s.renders - before == 1, s.renders - before


def test_a_client_that_sends_nothing_or_too_much_is_closed(
    server: tuple[http.MetricsServer, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
        started = time.monotonic()
        assert silent.recv(1) == b""  # closed by the server, not by this timeout
        waited = time.monotonic() - started
    assert http.REQUEST_DEADLINE_SECONDS - 1 <= waited < http.REQUEST_DEADLINE_SECONDS + 4
    with socket.create_connection(("127.0.0.1", port), timeout=10) as big:
        try:
            big.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (2 * http.MAX_REQUEST_BYTES))
            answer = big.recv(1)
        except ConnectionResetError:
            answer = b""
        assert answer == b""


def test_over_the_cap_the_longest_silent_connection_makes_room(
    server: tuple[http.MetricsServer, int],
) -> None:
    """MAX_WAITING silent connections, older than the grace; one more closes the oldest, and
    a client that then asks is answered."""
    _, port = server
    silent = [
        socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(http.MAX_WAITING)
    ]
    try:
        time.sleep(http.SILENT_GRACE_SECONDS + 0.2)
        answer = raw(port, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer
        # Closed to make room, well before its own request deadline would close it.
        silent[0].settimeout(1.5)
        with contextlib.suppress(ConnectionResetError):
            assert silent[0].recv(1) == b""
        silent[1].setblocking(False)
        with pytest.raises(BlockingIOError):  # the next one is still open
            silent[1].recv(1)
    finally:
        for s in silent:
            s.close()


def test_a_port_in_use_is_an_oserror_in_the_callers_thread(
    server: tuple[http.MetricsServer, int],
) -> None:
    """listen() binds before any thread starts, so `fioprobe continuous` can refuse the
    address with one line (tests/continuous/test_continuous.py has the message)."""
    _, port = server
    with pytest.raises(OSError):
        http.MetricsServer(lambda: b"", CONTENT_TYPE).listen("127.0.0.1", port)


class FakeClient:
    """What admit() reads of a connection: its age, what it has sent (read, or whole and still
    unread in its socket), its closing."""

    def __init__(self, age: float, spoken: bool, unread: bool = False) -> None:
        self.since = time.monotonic() - age
        self.request = b"GET /met" if spoken else b""
        self.silent = not spoken and not unread
        self.closed = False

    def abort(self) -> None:
        self.closed = True


def test_at_the_hard_cap_the_order_of_who_goes() -> None:
    """At the hard cap: a silent connection past the grace first, then one past the grace
    that sent part of a request (a byte at a time), then a silent one however young; the
    newcomer only when every waiting connection has spoken and none is past the grace."""
    server = http.MetricsServer(lambda: b"", CONTENT_TYPE)
    server._soft_cap, server._hard_cap = 2, 4
    old_partial = [FakeClient(age=2.0, spoken=True) for _ in range(2)]
    young_silent = [FakeClient(age=0.0, spoken=False) for _ in range(2)]
    for client in [*old_partial, *young_silent]:
        server.admit(client)  # type: ignore[arg-type]
    assert not any(c.closed for c in [*old_partial, *young_silent])
    newcomers = [FakeClient(age=0.0, spoken=False) for _ in range(3)]
    server.admit(newcomers[0])  # type: ignore[arg-type]
    assert old_partial[0].closed and not any(c.closed for c in young_silent)
    server.admit(newcomers[1])  # type: ignore[arg-type]
    assert old_partial[1].closed and not any(c.closed for c in young_silent)
    server.admit(newcomers[2])  # type: ignore[arg-type]
    assert young_silent[0].closed and not young_silent[1].closed
    assert not any(c.closed for c in newcomers)
    # A whole request unread for longer than the grace (a loop starved of CPU) is not a
    # request sent a byte at a time: it is never taken, the newcomer is closed instead.
    unread = [FakeClient(age=2.0, spoken=False, unread=True) for _ in range(4)]
    server._waiting.clear()
    for client in unread:
        server.admit(client)  # type: ignore[arg-type]
    turned_away = FakeClient(age=0.0, spoken=False)
    server.admit(turned_away)  # type: ignore[arg-type]
    assert turned_away.closed and not any(c.closed for c in unread)
    spoken = [FakeClient(age=0.0, spoken=True) for _ in range(4)]
    server._waiting.clear()
    for client in spoken:
        server.admit(client)  # type: ignore[arg-type]
    last = FakeClient(age=0.0, spoken=False)
    server.admit(last)  # type: ignore[arg-type]
    assert last.closed and not any(c.closed for c in spoken)


def test_under_the_hard_cap_only_a_silent_connection_past_the_grace_goes() -> None:
    server = http.MetricsServer(lambda: b"", CONTENT_TYPE)
    server._soft_cap, server._hard_cap = 2, 10
    waiting = [FakeClient(age=2.0, spoken=True), FakeClient(age=0.0, spoken=False)]
    for client in waiting:
        server.admit(client)  # type: ignore[arg-type]
    newcomer = FakeClient(age=0.0, spoken=False)
    server.admit(newcomer)  # type: ignore[arg-type]
    assert not any(c.closed for c in [*waiting, newcomer])
    silent_old = FakeClient(age=2.0, spoken=False)  # the longest waiting
    server._waiting = {silent_old: None, **server._waiting}  # type: ignore[dict-item]
    server.admit(FakeClient(age=0.0, spoken=False))  # type: ignore[arg-type]
    assert silent_old.closed and not any(c.closed for c in waiting)


class SocketTransport:
    """What `_Client.silent` reads of its transport: the socket (a real one here)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> socket.socket | None:
        return self.sock if name == "socket" else None


def silence(client: http._Client) -> bool:
    return client.silent


def test_a_request_waiting_unread_in_the_socket_is_not_silence() -> None:
    """A connection accepted in a burst may hold its whole request before the loop reads it:
    it has spoken, and is never closed as silent."""
    server = http.MetricsServer(lambda: b"", CONTENT_TYPE)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        client = http._Client(server)
        client.transport = SocketTransport(ours)  # type: ignore[assignment]
        assert silence(client)
        theirs.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        for _ in range(500):  # 5 s at most for the bytes to cross the pair
            if not silence(client):
                break
            time.sleep(0.01)
        assert not silence(client)


def test_a_young_client_that_sends_its_request_gets_in_at_the_hard_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hard cap full of silent connections, all younger than the grace: a scrape is
    answered (a young silent connection makes room for it), where closing the newcomer
    turned away every scrape that arrived in a flood faster than the grace."""
    monkeypatch.setattr(http, "SILENT_GRACE_SECONDS", 600.0)
    s = http.MetricsServer(lambda: b"x 1\n", CONTENT_TYPE)
    s._soft_cap, s._hard_cap = 4, 8
    port = s.listen("127.0.0.1", 0)
    s.start()
    silent: list[socket.socket] = []
    try:
        for _ in range(8):
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        deadline = time.monotonic() + 10
        while len(s._waiting) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(s._waiting) == 8
        for _ in range(3):
            assert raw(port, b"GET /metrics HTTP/1.1\r\n\r\n").endswith(b"x 1\n")
        closed = 0
        for sock in silent[:3]:
            sock.settimeout(5)
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == 3, "the three longest-waiting silent connections made room"
    finally:
        for sock in silent:
            sock.close()
        s.stop()


def test_a_rendering_that_fails_is_answered_with_500() -> None:
    def broken() -> bytes:
        raise RuntimeError("collector broke")

    s = http.MetricsServer(broken, CONTENT_TYPE)
    port = s.listen("127.0.0.1", 0)
    s.start()
    try:
        answer = raw(port, b"GET /metrics HTTP/1.1\n\n")  # LF only: still a request
        assert answer.startswith(b"HTTP/1.1 500 "), answer
        assert answer.endswith(b"the metrics could not be rendered: collector broke\n"), answer
    finally:
        s.stop()


def test_every_address_is_ipv6_and_ipv4_where_the_host_has_both() -> None:
    if not socket.has_dualstack_ipv6():
        pytest.skip("no dual-stack IPv6 on this host")
    s = http.MetricsServer(lambda: b"x 1\n", CONTENT_TYPE)
    port = s.listen("", 0)
    s.start()
    try:
        assert raw(port, b"GET /metrics HTTP/1.1\r\n\r\n").endswith(b"x 1\n")
        with socket.create_connection(("::1", port), timeout=5) as six:
            six.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            assert six.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        s.stop()
