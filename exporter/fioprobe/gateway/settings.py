"""Where the Pushgateway is and how to talk to it: the part of a configuration the gateway
code reads.

Its own module, below the configuration loader (`fioprobe.target.config`, which builds it
from YAML and checks every value), so that the transport and the shard picker take it without
importing the probe layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from fioprobe.gateway import defaults as push_defaults


@dataclass(frozen=True, slots=True)
class PushgatewayConfig:
    url: str
    username_file: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    timeout_seconds: float = push_defaults.TIMEOUT_SECONDS
    attempts: int = push_defaults.ATTEMPTS
    writer_lease_seconds: float = push_defaults.WRITER_LEASE_SECONDS
    #: The replicas of a sharded Pushgateway (`url` is then the first); empty: `url` alone.
    shards: tuple[str, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        """Every replica a group may live on (see fioprobe.gateway.shards)."""
        return self.shards or (self.url,)
