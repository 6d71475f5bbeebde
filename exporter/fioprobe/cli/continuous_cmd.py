"""`fioprobe continuous`: the low-rate write + fdatasync stream, served on /metrics.

Only the command line lives here; the stream itself, and the bounds of its options, are
`fioprobe.continuous` (docs/CONTINUOUS.md), which reads the parsed options as they are.
"""

from __future__ import annotations

import argparse

from fioprobe.cli import continuous_options as bounded
from fioprobe.cli.options import add_etcd_disk_option

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
        "--listen", type=bounded.listen_address, default=("0.0.0.0", 9436),
        metavar="[HOST]:PORT", help="where /metrics is served (default :9436)",
    )  # fmt: skip
    parser.add_argument(
        "--interval", type=bounded.interval_seconds, default=1.0, metavar="S",
        help="seconds between two operations per target, 0.1 to 3600 (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--write-size", type=bounded.write_size_bytes, default=2300, metavar="BYTES",
        help="bytes per write, 512 to 1Mi (default 2300, as fio's etcd check)",
    )  # fmt: skip
    parser.add_argument(
        "--file-size", type=bounded.file_size_bytes, default=4 * 1024 * 1024, metavar="BYTES",
        help="the one preallocated file per target, 64Ki to 1Gi: its bytes on disk "
        "(default 4Mi)",
    )  # fmt: skip
    parser.add_argument(
        "--stall-threshold", type=bounded.stall_threshold_seconds, default=0.01, metavar="S",
        help="an operation outstanding longer counts into fioprobe_continuous_stall_seconds_total "
        "(default 0.01)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from fioprobe.continuous.command import run as serve

    return serve(args)
