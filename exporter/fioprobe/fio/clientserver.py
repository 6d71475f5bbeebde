"""fio client/server output read per server, beside fio's own "All clients" aggregate.

`parse_text` keeps one answer per document: the aggregate when there is one. A distributed
benchmark needs both: each server's own figures and fio's aggregate, which is not their sum:
fio adds the servers' IOs and bytes and divides by the longest runtime among them, so when
runtimes differ it is below the sum of the servers' rates. Both are kept, named apart.

Servers are told apart by fio's `hostname` and `port` of each entry (servers on one host
share a hostname). The document is checked as `parse_text` checks it, repeated keys
included (`fioprobe.fio.parse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fioprobe.fio.model import Run
from fioprobe.fio.parse import FioOutputError, read_document, run_of_entries

__all__ = ["AGGREGATE_NAME", "ClientServerRun", "ServerRun", "parse_client_server"]

#: The job name fio's client gives the aggregate over every server.
AGGREGATE_NAME = "All clients"


@dataclass(frozen=True, slots=True)
class ServerRun:
    """One server's own entries of a client/server document."""

    #: `hostname:port` as fio reported the server (the port is absent in fio 2.x output).
    server: str
    hostname: str
    port: int | None
    run: Run
    #: The raw job objects of this server, in fio's order, for archiving them as they are.
    entries: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class ClientServerRun:
    """fio's aggregate and each server's run, from one client/server document."""

    #: fio's "All clients" entries; None when fio wrote none (one server: nothing to add).
    aggregate: Run | None
    servers: tuple[ServerRun, ...]
    document: dict[str, Any]


def parse_client_server(text: str, source: str = "<stdin>") -> ClientServerRun:
    """Each server's run and fio's aggregate, or FioOutputError for anything else."""
    document = read_document(text, source)
    entries = document.get("client_stats")
    if not isinstance(entries, list):
        raise FioOutputError(source, 'not fio client/server output (no "client_stats" list)')
    aggregate: list[dict[str, Any]] = []
    by_server: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise FioOutputError(source, f"client_stats[{index}] is not an object")
        if entry.get("jobname") == AGGREGATE_NAME:
            aggregate.append(entry)
            continue
        by_server.setdefault(_server_of(entry, index, source), []).append(entry)
    if not by_server:
        raise FioOutputError(source, "client/server output names no server")
    servers = tuple(
        ServerRun(
            server=hostname if port is None else f"{hostname}:{port}",
            hostname=hostname,
            port=port,
            run=run_of_entries(document, server_entries, source),
            entries=tuple(server_entries),
        )
        for (hostname, port), server_entries in by_server.items()
    )
    return ClientServerRun(
        aggregate=run_of_entries(document, aggregate, source) if aggregate else None,
        servers=servers,
        document=document,
    )


def _server_of(entry: dict[str, Any], index: int, source: str) -> tuple[str, int | None]:
    hostname = entry.get("hostname")
    if not isinstance(hostname, str) or not hostname or not hostname.isprintable():
        raise FioOutputError(source, f"client_stats[{index}].hostname is not a host name")
    port = entry.get("port")
    if port is not None and (type(port) is not int or not 0 < port < 65536):
        raise FioOutputError(source, f"client_stats[{index}].port is not a port: {port!r:.40}")
    return hostname, port
