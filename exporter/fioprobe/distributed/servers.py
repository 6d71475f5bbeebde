"""The fio servers of a benchmark, as the caller names them: `host:port,host:port,...`.

Each becomes fio's own `--client=host,port`. Host names and addresses are checked to be
plain (DNS names, IPv4, or bracketed IPv6), so nothing in the list can become another fio
option or a file name on the client's command line.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fioprobe.distributed.failures import ServersFailed
from fioprobe.errors import FailureReason, UsageError

_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
#: At most this many servers per benchmark (the plan's limit too).
MAX_SERVERS = 64


@dataclass(frozen=True, slots=True)
class Server:
    host: str
    port: int

    @property
    def name(self) -> str:
        """host:port as the caller wrote it ([host]:port for IPv6), for messages."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def fio_client(self) -> str:
        """fio's --client value: `ip6:` before an IPv6 address (fio reads `,` as the port)."""
        if ":" in self.host:
            return f"ip6:{self.host},{self.port}"
        return f"{self.host},{self.port}"

    @property
    def label(self) -> str:
        """The `server` label: `host:port` as fio's output names the server (an IPv6 address
        without brackets), so that a failed server's series joins its figures."""
        return f"{self.host}:{self.port}"

    @property
    def key(self) -> tuple[str, int]:
        """(host, port) as `reported_key` makes it of fio's output, to match the two."""
        return self.host, self.port


def reported_key(hostname: str, port: int | None) -> tuple[str, int | None]:
    """fio's `hostname` and `port` of an output entry, comparable with `Server.key`.

    fio reports the host as it was given after `ip6:`, without brackets (`::1`), so a printed
    `host:port` never equals the bracketed name; an IPv6 address is compared in its
    canonical form, which is the form `parse_servers` sends.
    """
    try:
        return str(ipaddress.IPv6Address(hostname)), port
    except ValueError:
        return hostname, port


def parse_servers(text: str) -> tuple[Server, ...]:
    """`host:port,...` into servers; UsageError naming the entry that is not one."""
    entries = [entry.strip() for entry in text.split(",")]
    if not entries or not all(entries):
        raise UsageError(f"--servers {text!r:.80}: expected host:port,host:port,...")
    if len(entries) > MAX_SERVERS:
        raise UsageError(f"--servers: {len(entries)} servers, at most {MAX_SERVERS}")
    servers = tuple(_server(entry) for entry in entries)
    if len(set(servers)) != len(servers):
        raise UsageError("--servers: a server is named twice")
    return servers


def _server(entry: str) -> Server:
    host, sep, port_text = entry.rpartition(":")
    if not sep or not re.fullmatch(r"[0-9]{1,5}", port_text) or not 0 < int(port_text) < 65536:
        raise UsageError(f"--servers: {entry!r:.80} is not host:port (a port from 1 to 65535)")
    if host.startswith("[") and host.endswith("]"):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise UsageError(f"--servers: {host!r:.80} is not an IPv6 address") from None
        return Server(str(address), int(port_text))
    if _HOSTNAME.fullmatch(host) is None:
        raise UsageError(f"--servers: {host!r:.80} is not a host name or IPv4 address")
    return Server(host, int(port_text))


#: How long one connection attempt may take, and the pause between rounds of attempts.
_CONNECT_SECONDS = 2.0
_ROUND_SECONDS = 1.0


def wait_until_listening(
    servers: Sequence[Server], seconds: float, say: Callable[[str], None]
) -> None:
    """Return once every server accepts a TCP connection; ServersFailed after `seconds`.

    A client started beside its servers (one `kubectl apply`, one Helm release) would
    otherwise find them still starting and fail its first phase. Only a connection is made
    and closed: fio's server takes that as a client that left, and nothing is sent until
    every server is there, so a benchmark never starts on some of its servers.
    """
    say(f"waiting up to {seconds:g}s for {len(servers)} fio servers to listen")
    started = time.monotonic()
    deadline = started + seconds
    waiting = list(servers)
    while True:
        waiting = [server for server in waiting if not _accepts(server, deadline)]
        if not waiting:
            say(f"all {len(servers)} fio servers listening after {time.monotonic() - started:.0f}s")
            return
        if time.monotonic() >= deadline:
            raise ServersFailed(
                FailureReason.TIMEOUT,
                f"no fio server listening at {', '.join(s.name for s in waiting)} after "
                f"{seconds:g}s (--wait-for-servers); nothing was sent to any server",
                [server.label for server in waiting],
            )
        time.sleep(min(_ROUND_SECONDS, max(0.0, deadline - time.monotonic())))


def _accepts(server: Server, deadline: float) -> bool:
    timeout = min(_CONNECT_SECONDS, deadline - time.monotonic())
    if timeout <= 0:
        return False
    try:
        # A name that does not resolve yet (a pod without its address) is not listening yet.
        with socket.create_connection((server.host, server.port), timeout=timeout):
            return True
    except OSError:
        return False
