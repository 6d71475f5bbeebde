"""The fio servers of a benchmark, as the caller names them: `host:port,host:port,...`.

Each becomes fio's own `--client=host,port`. Host names and addresses are checked to be
plain (DNS names, IPv4, or bracketed IPv6), so nothing in the list can become another fio
option or a file name on the client's command line.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from fioprobe.errors import UsageError

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
