"""Bounded values of `fioprobe continuous`'s options: each an argparse type (fioprobe.cli.argtypes).

Bounds keep the stream a light, safe probe whatever is passed: no faster than 10 writes a
second, no write larger than 1 MiB, no file larger than 1 GiB.
"""

from __future__ import annotations

import argparse
import re

from fioprobe.cli.argtypes import seconds, size_bytes

INTERVAL_SECONDS = (0.1, 3600.0)
WRITE_SIZE_BYTES = (512, 1024 * 1024)
FILE_SIZE_BYTES = (64 * 1024, 1024**3)
STALL_THRESHOLD_SECONDS = (0.0001, 60.0)

interval_seconds = seconds(*INTERVAL_SECONDS)
stall_threshold_seconds = seconds(*STALL_THRESHOLD_SECONDS)
write_size_bytes = size_bytes(*WRITE_SIZE_BYTES)
file_size_bytes = size_bytes(*FILE_SIZE_BYTES)

_LISTEN = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.-]*)):(?P<port>\d{1,5})$")


def listen_address(text: str) -> tuple[str, int]:
    """[HOST]:PORT, [IPv6]:PORT; an empty host listens on every address; port 0 picks one."""
    match = _LISTEN.match(text)
    port = int(match.group("port")) if match else -1
    if match is None or not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"must be [HOST]:PORT, e.g. :9436 or 127.0.0.1:9436: {text!r}"
        )
    host = match.group("v6") or match.group("host") or "0.0.0.0"
    return host, port
