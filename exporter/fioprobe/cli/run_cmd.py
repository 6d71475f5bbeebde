"""`fioprobe run`: every target and profile of a configuration, once or on a schedule.

The entrypoint of the deployment: the CronJob runs it once, the per-node DaemonSet with
--every. The configuration file says what to probe and where to push; the options only pick
this node's share and the schedule.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fioprobe.cli import options
from fioprobe.cli.argtypes import whole

DESCRIPTION = (
    "Run every target and profile of a YAML configuration once, in order, pushing each result."
)
#: `--cycles`: how many runs of --every before it stops.
_cycles = whole(1, 1_000_000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, metavar="FILE", help="YAML configuration")
    parser.add_argument(
        "--node",
        default=os.environ.get("NODE_NAME"),
        help="run only node-local targets of this node (env NODE_NAME); shared targets always",
    )
    options.add_jobs_dir_option(parser)
    options.add_quiet_option(parser, "progress lines")
    parser.add_argument(
        "--every",
        type=options.interval_seconds,
        metavar="SECONDS",
        help="run again every SECONDS, 1 to 86400, at this node's own offset in the interval "
        "(the per-node DaemonSet's mode); without it, run once",
    )
    parser.add_argument(
        "--cycles",
        type=_cycles,
        metavar="N",
        help="with --every: stop after N runs, 1 to 1000000 (default: never)",
    )


def run(args: argparse.Namespace) -> int:
    from fioprobe.probe.config import load_config
    from fioprobe.probe.runner import run_config

    jobs_dir = options.jobs_dir(args)
    config = load_config(Path(args.config), jobs_dir)
    if args.every is not None:
        from fioprobe.probe.schedule import run_every

        return run_every(config, args.every, only_node=args.node, jobs_dir=jobs_dir,
                         quiet=args.quiet, cycles=args.cycles)  # fmt: skip
    return run_config(config, only_node=args.node, jobs_dir=jobs_dir, quiet=args.quiet)
