"""`fioprobe continuous` as the tests run it: the real command on a free port of 127.0.0.1
(`stream`), its /metrics read back (`Stream`, `ops`), a bounded wait (`wait_until`), and a
flood of idle, partial and slow clients against its port (`flood`; bench/continuous_load.py
floods with it too).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support import services
from support.paths import REPO

Samples = services.Samples


class Stream:
    """A running `fioprobe continuous`: its process, its port and its stderr log."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log
        self.url = f"http://127.0.0.1:{port}/metrics"

    def scrape(self, timeout: float = 5.0) -> Samples:
        return services.scrape(self.url, timeout)

    def value(self, name: str, **labels: str) -> float:
        """The one sample of `name` whose labels include `labels` (0 when absent)."""
        found = [
            v for (n, ls), v in self.scrape().items()
            if n == name and set(labels.items()) <= set(ls)
        ]  # fmt: skip
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else 0.0

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> tuple[int, float]:
        """SIGTERM; (exit status, seconds it took)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout)
        return code, time.monotonic() - started


def wait_until(what: str, check: object, timeout: float, step: float = 0.2) -> float:
    """Poll `check()` until true; returns the seconds it took, fails with `what` after timeout."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        try:
            if check():  # type: ignore[operator]
                return time.monotonic() - started
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(step)


@contextmanager
def stream(
    tmp_path: Path, *args: str, name: str = "stream", extra_groups: list[int] | None = None
) -> Iterator[Stream]:
    """`fioprobe continuous` on a free port; `extra_groups` (root only) are its supplementary
    groups, as a pod's fsGroup is."""
    port = services.free_port()
    log = tmp_path / f"{name}.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "fioprobe", "continuous", "--listen", f"127.0.0.1:{port}",
             *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
            extra_groups=extra_groups,
        )  # fmt: skip
    handle = Stream(process, port, log)
    try:
        wait_until("the stream serves /metrics", lambda: handle.scrape(1.0) is not None, 30)
        yield handle
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def ops(s: Stream, storageclass: str | None = None) -> float:
    """The operations the stream has done (for one StorageClass, or the only one)."""
    labels = {"storageclass": storageclass} if storageclass else {}
    return s.value("fioprobe_continuous_operations_total", **labels)


#: The flood of the suite's test, bounded in count and time: the test's own descriptors, and
#: its length.
IDLE_CONNECTIONS = 1500
SLOW_CLIENTS = 50
PARTIAL_CLIENTS = 50
FLOOD_SECONDS = 15.0


@contextmanager
def flood(
    port: int,
    stop: threading.Event,
    idle_connections: int = IDLE_CONNECTIONS,
    slow_clients: int = SLOW_CLIENTS,
    seconds: float = FLOOD_SECONDS,
    partial_clients: int = PARTIAL_CLIENTS,
) -> Iterator[dict[str, int]]:
    """`idle_connections` that connect and send nothing (reconnecting when closed),
    `partial_clients` that send the start of a request and hold it (reconnecting too), and
    `slow_clients` that send a whole request and read the answer a byte a second, for at most
    `seconds` + 30 (bench/continuous_load.py floods with it too)."""
    counts = {"idle_opened": 0, "slow_opened": 0, "partial_opened": 0}
    sockets: list[socket.socket] = []
    lock = threading.Lock()

    def connect() -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            return None
        with lock:
            sockets.append(s)
        return s

    def idle() -> None:
        held: list[socket.socket] = []
        deadline = time.monotonic() + seconds + 30
        while not stop.is_set() and time.monotonic() < deadline:
            held = [s for s in held if s.fileno() != -1]
            while len(held) < idle_connections // 4 and not stop.is_set():
                s = connect()
                if s is None:
                    break
                held.append(s)
                counts["idle_opened"] += 1
            stop.wait(0.5)
            for s in list(held):  # closed by the server: open another
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()

    def slow() -> None:
        deadline = time.monotonic() + seconds + 30
        while not stop.is_set() and time.monotonic() < deadline:
            s = connect()
            if s is None:
                stop.wait(0.2)
                continue
            counts["slow_opened"] += 1
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                s.settimeout(2)
                while not stop.is_set() and s.recv(1):
                    stop.wait(1.0)
            except OSError:
                pass
            finally:
                s.close()

    def partial() -> None:
        deadline = time.monotonic() + seconds + 30
        while not stop.is_set() and time.monotonic() < deadline:
            s = connect()
            if s is None:
                stop.wait(0.2)
                continue
            counts["partial_opened"] += 1
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
                s.settimeout(1)
                while not stop.is_set():
                    try:
                        if s.recv(1) == b"":
                            break  # closed by the server: open another
                    except TimeoutError:
                        continue
            except OSError:
                pass
            finally:
                s.close()

    threads = [threading.Thread(target=idle, daemon=True) for _ in range(4)]
    threads += [threading.Thread(target=partial, daemon=True) for _ in range(partial_clients)]
    threads += [threading.Thread(target=slow, daemon=True) for _ in range(slow_clients)]
    for t in threads:
        t.start()
    try:
        yield counts
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        with lock:
            for s in sockets:
                s.close()
