"""Which fio servers still answer: the ones a failed phase names, the ones the clean-up skips.

fio's client names a server that stops answering by its host alone (`fio: client 10.0.0.7
timed out`), and at times keeps waiting on it until fioprobe's deadline stops it, printing
nothing. A TCP connection proves nothing either: the kernel completes it for a frozen fio
server (SIGSTOP, a stalled node) and for anything else listening on the port. So the check
speaks fio's own protocol: on a fresh connection it sends the PROBE command that fio's client
sends first, and a server answers it at once, even while it runs a job (it forks a process
per connection). No job is sent: the PROBE only makes the server report its host and version.

A reply, or the connection closed by the server (a fio of another protocol version refuses
the command that way, at once), counts as an answer: such a server keeps nobody waiting. A
server that gives neither within the check's time is named, and the clean-up is not sent to
it, so that a failed benchmark waits on a silent server once, not twice.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from fioprobe.distributed.servers import Server

#: How long the whole check may take: every server is checked at once.
CHECK_SECONDS = 5.0
#: How long past the deadline a check's thread is waited for: its socket's own timeout ends
#: it at the deadline, and a thread that is later still (a name resolving) is not waited for.
_JOIN_SLACK_SECONDS = 0.5
#: fio 3.33's protocol version (FIO_SERVER_VER): a server of another version closes the
#: connection on it, which is an answer too (see the module's docstring).
_PROTOCOL_VERSION = 97
_PROBE = 10  # FIO_NET_CMD_PROBE
#: fio's command header: version, opcode, flags, tag, payload length (little-endian); its
#: CRC-16 covers these 20 bytes, then come its own CRC and the payload's.
_HEADER = struct.Struct("<HHIQI")
_COMMAND_BYTES = _HEADER.size + 4
#: The PROBE's payload: flags (no compression asked for) and the name the client knows the
#: server by (fio's server prints it in its own log lines).
_PAYLOAD = struct.Struct("<Q128s")
#: The most of a reply that is read (fio 3.33's PROBE reply is 112 bytes after its header).
_MAX_REPLY_BYTES = 4096


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """Why a server counts as not answering."""

    #: In words, for the error and the clean-up line.
    why: str
    #: Whether the server let the time run out (a frozen server, a silent listener, packets
    #: dropped) rather than refusing at once: a failure it causes is a `timeout`.
    timed_out: bool


def unanswered(servers: Sequence[Server], seconds: float = CHECK_SECONDS) -> dict[Server, NoAnswer]:
    """The servers that do not answer fio's PROBE within `seconds`, each with why.

    Every server is checked in a thread of its own, at once; the threads are daemons and
    are not waited for much past `seconds` (a name that takes longer to resolve counts as
    no answer), so the check takes at most about that long.
    """
    results: dict[Server, NoAnswer | None] = {}
    deadline = time.monotonic() + seconds

    def check(server: Server) -> None:
        results[server] = _probe(server, deadline, seconds)

    threads = [
        threading.Thread(target=check, args=(s,), name=f"probe {s.name}", daemon=True)
        for s in servers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:  # each ends by the deadline, but for a name still resolving
        thread.join(max(0.0, deadline + _JOIN_SLACK_SECONDS - time.monotonic()))
    late = NoAnswer(f"no answer to fio's probe within {seconds:g}s", timed_out=True)
    found = {server: results.get(server, late) for server in servers}
    return {server: answer for server, answer in found.items() if answer is not None}


def probe_command(server: Server) -> bytes:
    """fio's PROBE command for `server`, checksummed as fio's client sends it."""
    payload = _PAYLOAD.pack(0, server.host.encode()[:127])
    header = _HEADER.pack(_PROTOCOL_VERSION, _PROBE, 0, 0, len(payload))
    checksums = struct.pack("<HH", crc16(header), crc16(payload))
    return header + checksums + payload


def crc16(data: bytes) -> int:
    """fio's CRC-16 (the kernel's: polynomial 0x8005, reflected, initial value 0)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _probe(server: Server, deadline: float, seconds: float) -> NoAnswer | None:
    """None when the server answers (a reply or a close), else why not."""
    silent = NoAnswer(f"connected, no answer to fio's probe within {seconds:g}s", timed_out=True)
    try:
        connection = socket.create_connection(
            (server.host, server.port), timeout=max(0.01, deadline - time.monotonic())
        )
    except TimeoutError:
        return NoAnswer(f"no connection within {seconds:g}s", timed_out=True)
    except ConnectionRefusedError:
        return NoAnswer("refused the connection", timed_out=False)
    except OSError as exc:
        return NoAnswer(f"no connection: {exc.strerror or exc}", timed_out=False)
    with connection:
        try:
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            connection.sendall(probe_command(server))
            answered = _read_reply(connection)
        except OSError:
            return None  # reset by the server: it answered, by refusing
    return None if answered else silent


def _read_reply(connection: socket.socket) -> bool:
    """Whether the server answered: its reply, or its end of the connection.

    The reply is read whole before the connection is closed, so that the server sees an
    orderly close (not a reset, which its log would report as an error).
    """
    head = _receive(connection, _COMMAND_BYTES)
    if head is None:
        return False
    if len(head) == _COMMAND_BYTES:
        _receive(connection, min(_HEADER.unpack_from(head)[4], _MAX_REPLY_BYTES))
    return True


def _receive(connection: socket.socket, count: int) -> bytes | None:
    """Up to `count` bytes, fewer when the server closes or the time runs out; None when
    nothing came before the time ran out."""
    received = b""
    while len(received) < count:
        try:
            chunk = connection.recv(count - len(received))
        except TimeoutError:
            return received or None
        if not chunk:
            break
        received += chunk
    return received
