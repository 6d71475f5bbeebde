"""Which Pushgateway replica holds a group: rendezvous (highest random weight) hashing.

One Pushgateway checks every push against everything it holds, so a push costs more the more
groups it holds (docs/SIZING.md). Past the sizing rule's groups per replica, the groups are
split over N replicas. Every writer and every reader must agree, without talking to each
other, on the one replica of a group, and changing N must move as few groups as possible:
each (replica, group) pair gets a pseudo-random weight and the group lives on the replica of
highest weight. Adding a replica moves only the groups whose new highest weight is the new
replica's (about 1/(N+1) of them); removing one moves only the groups it held. A modulo over
N would move almost all of them.

The weight is computed from the replica's URL without its scheme (switching to https moves
nothing) and from the grouping key without `writer`, so that a writer conflict group lives
beside its probe's group. How a group moves without being counted twice is `publish`'s part
(docs/SIZING.md, "Sharding").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fioprobe.gateway.settings import PushgatewayConfig
from fioprobe.gateway.transport import Transport, TransportConfigError
from fioprobe.grouping import WRITER

#: Labels that never choose a replica: a conflict group stays beside its probe's group.
_NOT_HASHED = frozenset({WRITER})


def identity(url: str) -> str:
    """What of a replica's URL is hashed: host, port and path, without scheme or slash."""
    rest = url.partition("://")[2] or url
    return rest.rstrip("/").lower()


def key_text(grouping_key: dict[str, str]) -> str:
    """The grouping key as hashed: sorted name=value lines, `writer` left out."""
    return "".join(
        f"{name}={value}\n"
        for name, value in sorted(grouping_key.items())
        if name not in _NOT_HASHED
    )


def weight(url: str, grouping_key: dict[str, str]) -> int:
    digest = hashlib.sha256(f"{identity(url)}\0{key_text(grouping_key)}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def pick(urls: Sequence[str], grouping_key: dict[str, str]) -> int:
    """Index of the replica in `urls` that holds the group (ties go to the first)."""
    if not urls:
        raise ValueError("no Pushgateway replica to pick from")
    weights = [weight(url, grouping_key) for url in urls]
    return weights.index(max(weights))


@dataclass(frozen=True, slots=True)
class Shards:
    """The Pushgateway replicas of one deployment, each with the same credentials and TLS."""

    transports: tuple[Transport, ...]

    def __post_init__(self) -> None:
        if not self.transports:
            raise TransportConfigError("at least one Pushgateway URL is required")
        seen = {identity(t.url) for t in self.transports}
        if len(seen) != len(self.transports):
            raise TransportConfigError("a Pushgateway replica is listed twice")

    @classmethod
    def of(cls, transport: Transport | Shards) -> Shards:
        return transport if isinstance(transport, Shards) else cls((transport,))

    @classmethod
    def from_config(cls, config: PushgatewayConfig) -> Shards:
        return cls(tuple(Transport.from_config(config, url) for url in config.urls))

    def __len__(self) -> int:
        return len(self.transports)

    def __iter__(self) -> Iterator[Transport]:
        return iter(self.transports)

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(t.url for t in self.transports)

    def for_key(self, grouping_key: dict[str, str]) -> Transport:
        """The replica that holds this group."""
        return self.transports[pick(self.urls, grouping_key)]

    def by_url(self, url: str) -> Transport | None:
        """The listed replica with this URL (scheme ignored), None if it is not listed."""
        wanted = identity(url)
        return next((t for t in self.transports if identity(t.url) == wanted), None)

    def others(self, transport: Transport) -> tuple[Transport, ...]:
        return tuple(t for t in self.transports if t is not transport)

    @property
    def shown(self) -> str:
        if len(self.transports) == 1:
            return self.transports[0].shown_url
        return f"{len(self.transports)} Pushgateway replicas"
