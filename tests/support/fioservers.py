"""Real `fio --server` processes on 127.0.0.1, each in a working directory of its own.

A fio server writes its jobs' files into its working directory when the job names none,
which is how `fioprobe distributed` sends them; so each server here gets its own directory,
and a test can check that the benchmark left nothing in it. Servers are started on free
ports, found listening through /proc/net/tcp (connecting would start a session with the
server), stopped by PID, and checked gone, children included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fioprobe.fio.execute import STAT_PARENT, live_processes

from support.services import LOCALHOST, free_port, wait_for

#: IPv6's loopback, as fio's `--server=ip6:` takes it.
LOCALHOST6 = "::1"


@dataclass
class FioServer:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    host: str = LOCALHOST

    @property
    def address(self) -> str:
        """host:port as `fioprobe distributed --servers` takes it (IPv6 in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def children(self) -> list[int]:
        """Live processes whose parent is this server (fio forks one per job run)."""
        return live_processes(STAT_PARENT, self.process.pid)

    def files(self) -> list[str]:
        return sorted(os.listdir(self.directory))


def listening(port: int, host: str = LOCALHOST) -> bool:
    """Whether something listens on 127.0.0.1:port or [::1]:port (state 0A in
    /proc/net/tcp or tcp6, which write the address as the kernel's 32-bit words)."""
    ipv6 = host == LOCALHOST6
    wanted = f"{'0' * 24 + '01000000' if ipv6 else '0100007F'}:{port:04X}"
    with open("/proc/net/tcp6" if ipv6 else "/proc/net/tcp") as handle:
        return any(
            line.split()[1] == wanted and line.split()[3] == "0A" for line in handle.readlines()[1:]
        )


def start_servers(
    base: Path, count: int, host: str = LOCALHOST, ports: list[int] | None = None
) -> list[FioServer]:
    """`count` servers on free ports, or on `ports` (a test that made a client wait for them)."""
    servers = []
    for index in range(count):
        directory = base / f"server{index}"
        directory.mkdir(parents=True)
        port = ports[index] if ports else free_port()
        process = subprocess.Popen(
            ["fio", f"--server={'ip6' if ':' in host else 'ip'}:{host},{port}"],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        servers.append(FioServer(port, directory, process, host))
    for server in servers:
        port = server.port
        wait_for(lambda port=port: listening(port, host), timeout=15, what=f"fio server on {port}")
    return servers


def stop_servers(servers: list[FioServer]) -> None:
    """SIGTERM each server by PID, then SIGKILL; wait until each and its children are gone."""
    for server in servers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for server in servers:
        try:
            server.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=10)


@contextlib.contextmanager
def fio_servers(
    base: Path, count: int, host: str = LOCALHOST, ports: list[int] | None = None
) -> Iterator[list[FioServer]]:
    servers = start_servers(base, count, host, ports)
    try:
        yield servers
    finally:
        stop_servers(servers)


def fio_clients(ports: list[int]) -> list[str]:
    """Command lines of fio clients still talking to any of these ports on 127.0.0.1: what a
    test asserts is empty once fioprobe has ended."""
    wanted = [f"--client=127.0.0.1,{port}".encode() for port in ports]
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                cmdline = handle.read()
        except OSError:
            continue
        if any(w in cmdline for w in wanted):
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found
