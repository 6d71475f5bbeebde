"""`fioprobe convert`: one fio output as Prometheus text on stdout, nothing pushed.

For node_exporter's textfile collector and for looking at what a run becomes: the same
metrics a push carries, counted over this one run only (there is no state to merge into).
"""

from __future__ import annotations

import argparse
import sys

from fioprobe.cli.options import add_group_options, add_input_argument, read_input
from fioprobe.errors import ExitCode
from fioprobe.grouping import PROBE_LABELS

DESCRIPTION = (
    "Print the metrics of one fio output on stdout, e.g. for node_exporter's textfile "
    "collector. Counters cover this one run only."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_argument(parser)
    add_group_options(parser, required=False)


def run(args: argparse.Namespace) -> int:
    from fioprobe.offline.convert import convert_text

    text, name = read_input(args.file)
    # Labels, not a checked grouping key: convert prints text and pushes nothing, so an unset
    # --storageclass or --profile is left out rather than refused.
    labels = {
        name: value
        for name, value in zip(
            PROBE_LABELS, (args.storageclass, args.profile, args.node), strict=True
        )
        if value
    }
    sys.stdout.buffer.write(convert_text(text, name, labels))
    return ExitCode.OK
