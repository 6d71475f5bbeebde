"""`fioprobe continuous`: the low-rate write + fdatasync stream, served on /metrics.

The command line and the bounds of its options live here; the stream itself is
`fioprobe.continuous` (docs/CONTINUOUS.md), which reads the parsed options as they are.
Bounds keep the stream a light, safe probe whatever is passed: no faster than 10 writes a
second, no write larger than 1 MiB, no file larger than 1 GiB.
"""

from __future__ import annotations

import argparse
import re

from fioprobe.cli.argtypes import seconds, size_bytes
from fioprobe.cli.options import add_etcd_disk_option
from fioprobe.thresholds import STREAM_STALL_THRESHOLD_SECONDS

INTERVAL_SECONDS = (0.1, 3600.0)
WRITE_SIZE_BYTES = (512, 1024 * 1024)
FILE_SIZE_BYTES = (64 * 1024, 1024**3)
STALL_THRESHOLD_SECONDS = (0.0001, 60.0)

interval_seconds = seconds(*INTERVAL_SECONDS)
stall_threshold_seconds = seconds(*STALL_THRESHOLD_SECONDS)
write_size_bytes = size_bytes(*WRITE_SIZE_BYTES)
file_size_bytes = size_bytes(*FILE_SIZE_BYTES)

_LISTEN = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.-]*)):(?P<port>\d{1,5})$")

DESCRIPTION = (
    "Write etcd's WAL pattern (a small write, then fdatasync) about once a second on every "
    "target, each in a child process of its own, and serve the latency, the age of an "
    "operation still outstanding and stall time on /metrics (scraped, not pushed). SIGTERM "
    "stops it within 2 s. See docs/CONTINUOUS.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="the targets of this YAML file (as `run`)")
    parser.add_argument("--dir", help="one target: its directory (must exist)")
    parser.add_argument("--storageclass", help="one target: its storageclass label")
    parser.add_argument(
        "--node",
        help="node label: of the --dir target, or of the configuration's node-local targets "
        "(for those, env NODE_NAME by default)",
    )
    add_etcd_disk_option(parser, "no")
    parser.add_argument(
        "--listen", type=listen_address, default=("0.0.0.0", 9436),
        metavar="[HOST]:PORT", help="where /metrics is served (default :9436)",
    )  # fmt: skip
    parser.add_argument(
        "--interval", type=interval_seconds, default=1.0, metavar="S",
        help="seconds between two operations per target, 0.1 to 3600 (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--write-size", type=write_size_bytes, default=2300, metavar="BYTES",
        help="bytes per write, 512 to 1Mi (default 2300, as fio's etcd check)",
    )  # fmt: skip
    parser.add_argument(
        "--file-size", type=file_size_bytes, default=4 * 1024 * 1024, metavar="BYTES",
        help="the one preallocated file per target, 64Ki to 1Gi: its bytes on disk "
        "(default 4Mi)",
    )  # fmt: skip
    parser.add_argument(
        "--stall-threshold", type=stall_threshold_seconds, default=STREAM_STALL_THRESHOLD_SECONDS,
        metavar="S",
        help="an operation outstanding longer counts into fioprobe_continuous_stall_seconds_total "
        f"(default {STREAM_STALL_THRESHOLD_SECONDS:g})",
    )  # fmt: skip


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


def run(args: argparse.Namespace) -> int:
    from fioprobe.continuous.command import run as serve

    return serve(args)
