"""Bounded values of `fioprobe continuous`'s options: each an argparse type, one line each.

Bounds keep the stream a light, safe probe whatever is passed: no faster than 10 writes a
second, no write larger than 1 MiB, no file larger than 1 GiB.
"""

from __future__ import annotations

import argparse
import math
import re

from ..config import quantity_bytes

INTERVAL_SECONDS = (0.1, 3600.0)
WRITE_SIZE_BYTES = (512, 1024 * 1024)
FILE_SIZE_BYTES = (64 * 1024, 1024**3)
STALL_THRESHOLD_SECONDS = (0.0001, 60.0)


def _seconds(bounds: tuple[float, float]) -> argparse._ActionType:  # type: ignore[name-defined]
    low, high = bounds

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"must be from {low:g} to {high:g} seconds: {text!r}")
        return value

    return parse


def _bytes(bounds: tuple[int, int]) -> argparse._ActionType:  # type: ignore[name-defined]
    low, high = bounds

    def parse(text: str) -> int:
        value = quantity_bytes(text)
        if value is None:
            raise argparse.ArgumentTypeError(
                f"not a size in bytes (a number, or a quantity like 4Mi): {text[:64]!r}"
            )
        if not (low <= value <= high and value == int(value)):
            raise argparse.ArgumentTypeError(
                f"must be a whole number of bytes from {low} to {high}: {text!r}"
            )
        return int(value)

    return parse


interval_seconds = _seconds(INTERVAL_SECONDS)
stall_threshold_seconds = _seconds(STALL_THRESHOLD_SECONDS)
write_size_bytes = _bytes(WRITE_SIZE_BYTES)
file_size_bytes = _bytes(FILE_SIZE_BYTES)

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
