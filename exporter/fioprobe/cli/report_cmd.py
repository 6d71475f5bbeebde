"""`fioprobe report`: a comparison report over folders and archives of fio results.

For results gathered outside the exporter (benchmark batteries, archives from other
clusters): Markdown, self-contained HTML, JSON and PNG charts side by side. matplotlib is an
optional dependency, so every option is checked before it is imported, and its absence is a
usage error that says how to install it.
"""

from __future__ import annotations

import argparse

from fioprobe.cli import options
from fioprobe.cli.argtypes import number
from fioprobe.errors import ExitCode, UsageError
from fioprobe.thresholds import ETCD_FSYNC_P99_SECONDS, LATENCY_YELLOW_SECONDS

DESCRIPTION = (
    "Read fio results (files, nested folders such as <battery>_<cluster>-fio-<host>/.../*.json, "
    ".tar.gz archives read in place), group them and write report.md, report.html "
    "(self-contained), report.json and charts/ into OUTDIR. Unreadable files are listed in the "
    "report and do not stop it."
)
#: `--warn-ms/--crit-ms`: latency thresholds, a microsecond to a minute.
_threshold_ms = number(0.001, 60_000, "milliseconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_results_options(parser, "OUTDIR", "output folder")
    parser.add_argument("--baseline", metavar="GROUP", help="compare every group to this one")
    warn_ms, crit_ms = LATENCY_YELLOW_SECONDS * 1e3, ETCD_FSYNC_P99_SECONDS * 1e3
    parser.add_argument(
        "--warn-ms",
        type=_threshold_ms,
        default=warn_ms,
        help=f"yellow from, 0.001 to 60000 (default {warn_ms:g})",
    )
    parser.add_argument(
        "--crit-ms",
        type=_threshold_ms,
        default=crit_ms,
        help=f"red from, 0.001 to 60000 (default {crit_ms:g})",
    )
    parser.add_argument("--title", default="fio results", help="report title")
    options.add_quiet_option(parser, "summary line")


def run(args: argparse.Namespace) -> int:
    # Options are checked before matplotlib is imported: a typo costs no font cache.
    if not args.warn_ms <= args.crit_ms:
        raise UsageError("--warn-ms must be at or below --crit-ms")
    grouping = options.grouping(args)
    try:
        from fioprobe.report.build import ReportOptions, build_report
    except ImportError as exc:
        raise UsageError(
            f"fioprobe report needs matplotlib ({exc}): pip install 'fioprobe[report]'"
        ) from None

    report_options = ReportOptions(
        grouping=grouping,
        baseline=args.baseline,
        warn_ms=args.warn_ms,
        crit_ms=args.crit_ms,
        title=args.title,
    )
    result = build_report(args.paths, args.output, report_options)
    options.say(
        args,
        f"report of {result.files_parsed} of {result.files_read} files "
        f"({len(result.unreadable)} unreadable) in {result.html}",
    )
    for line in result.verdict_lines:
        options.say(args, line)
    return ExitCode.OK if result.files_parsed else ExitCode.BAD_INPUT
