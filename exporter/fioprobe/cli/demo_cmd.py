"""`fioprobe demo`: the whole chain on this machine, from probes to alerts and dashboards.

Shows what the exporter, the mixin's rules and its dashboards do without a cluster: a local
Pushgateway, Prometheus and Alertmanager, and etcd-fsync probes of three disks (local, memory,
a deliberately slow one). Its numbers are bounded so that no value can make it spin or run
away; everything it starts stops with it.
"""

from __future__ import annotations

import argparse

from fioprobe.cli.argtypes import whole
from fioprobe.cli.options import interval_seconds

DESCRIPTION = (
    "Ctrl-C, SIGTERM and SIGHUP stop everything the demo started and remove its files. With "
    "GRAFANA_URL (and GRAFANA_TOKEN) set, the dashboards and a datasource are also provisioned "
    "into that Grafana."
)
#: `--iterations` (0: until stopped) and `--preview-every`.
_iterations = whole(0, 1_000_000)
_preview_every = whole(1, 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--interval", type=interval_seconds, default=10.0,
        help="seconds between probe rounds, 1 to 86400; the rules' windows follow from it "
        "(default 10)",
    )  # fmt: skip
    parser.add_argument(
        "--iterations",
        type=_iterations,
        default=0,
        help="stop after N rounds, up to 1000000 (default 0: until Ctrl-C)",
    )
    parser.add_argument(
        "--workdir", help="make the demo's temporary directory here (removed at the end)"
    )
    parser.add_argument(
        "--previews", help="draw the dashboards here (kept) instead of the temporary directory"
    )
    parser.add_argument(
        "--preview-every",
        type=_preview_every,
        default=3,
        metavar="N",
        help="draw them every N rounds, 1 to 1000 (default 3)",
    )


def run(args: argparse.Namespace) -> int:
    from fioprobe.demo.chain import run_demo

    return run_demo(
        interval=args.interval,
        iterations=args.iterations,
        workdir=args.workdir,
        previews=args.previews,
        preview_every=args.preview_every,
    )
