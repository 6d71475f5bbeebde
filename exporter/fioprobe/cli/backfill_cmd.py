"""`fioprobe backfill`: fio results into Prometheus TSDB blocks, each run at its own time.

For history the exporter never saw: the series the live exporter would have pushed (the
same names, labels and cumulative histograms), written as OpenMetrics with each run's
timestamp and turned into blocks by promtool, ready to copy into a Prometheus.
"""

from __future__ import annotations

import argparse

from fioprobe.cli import options
from fioprobe.errors import ExitCode
from fioprobe.text import printable

DESCRIPTION = (
    "Turn fio results into the series the live exporter would have pushed (cumulative "
    "histograms per group, storageclass=GROUP, profile=JOB), each run at its own timestamp, and "
    "run `promtool tsdb create-blocks-from openmetrics` into DIR. Copy the blocks into a "
    "Prometheus data directory whose --storage.tsdb.retention.time reaches back to the oldest "
    "run."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_results_options(parser, "DIR", "block folder")
    parser.add_argument(
        "--label", action="append", metavar="NAME=VALUE", help="extra label on every series"
    )
    parser.add_argument("--promtool", default="promtool", help="promtool binary")
    options.add_quiet_option(parser, "summary lines")


def run(args: argparse.Namespace) -> int:
    from fioprobe.offline.backfill import backfill, parse_labels

    grouping = options.grouping(args)
    labels = parse_labels(args.label or [])
    result = backfill(
        args.paths,
        args.output,
        grouping,
        labels,
        promtool=args.promtool,
        announce=None if args.quiet else (lambda message: options.say(args, message)),
    )
    for item in result.unreadable:
        # File and archive member names are the archive's, not ours: printed inert.
        options.say(args, f"skipped {printable(item.name, 300)}: {printable(item.reason, 300)}")
    options.say(
        args,
        f"{result.pushes} pushes of {result.series_keys} series keys from "
        f"{result.files_parsed} files, {len(result.blocks)} blocks in {args.output}",
    )
    return ExitCode.OK if result.files_parsed else ExitCode.BAD_INPUT
