"""The `fioprobe` command: the table of its commands, the parser built from it, and `main`.

Why one table: a command is a module with `DESCRIPTION`, `add_arguments(parser)` and
`run(args) -> int`, and one row here (name, one-line help, module) registers it; the parser,
the help and the dispatch all follow from the rows. Adding a command is a new module, a row
here, and its saved help (tests/data/cli-help/). The command modules import their heavy
dependencies inside `run`, so that building the parser, which every command pays for, stays
fast.

Every error a command reports is a FioprobeError that carries its exit status; `main` maps
them to it in one place, the same for every command (EXIT_STATUS, shown by --help).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol

from fioprobe import __version__
from fioprobe.cli import (
    backfill_cmd,
    continuous_cmd,
    convert_cmd,
    demo_cmd,
    distributed_cmd,
    gc_cmd,
    prepare_cmd,
    probe_cmd,
    provision_cmd,
    push_cmd,
    report_cmd,
    run_cmd,
)
from fioprobe.errors import ExitCode, FioprobeError, Interrupted

EXIT_STATUS = """\
Exit status (the same for every subcommand):
  0  success
  1  the probe ran and failed; the failure was pushed (fioprobe_success 0)
  2  usage, configuration or state-file error: a bad argument, config or state file (nothing
     was run or pushed), or a state file that could not be saved (the run was pushed)
  3  the fio output could not be read; nothing was pushed
  4  the Pushgateway could not be reached or refused the push; the run's counts are kept in
     the state file and go out with the next successful push
"""


class CommandModule(Protocol):
    """What a command module provides."""

    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


@dataclass(frozen=True)
class Command:
    name: str
    #: The line `fioprobe --help` lists it with.
    help: str
    module: CommandModule


#: Every command, in the order `fioprobe --help` lists them.
COMMANDS: tuple[Command, ...] = (
    Command(
        "convert",
        "print the Prometheus text exposition of one fio output (no push)",
        convert_cmd,
    ),
    Command("push", "merge one fio output into its group's totals and push them", push_cmd),
    Command("probe", "run one fio profile in a directory and push the result", probe_cmd),
    Command(
        "run",
        "run every configured probe of this host once (the CronJob entrypoint)",
        run_cmd,
    ),
    Command(
        "prepare-dirs",
        "the init container: make the node's hostPath directories the probe's (owner, 0700)",
        prepare_cmd,
    ),
    Command(
        "continuous",
        "a low-rate write + fdatasync stream per target, served on /metrics for Prometheus",
        continuous_cmd,
    ),
    Command(
        "demo",
        "local Pushgateway, Prometheus with the mixin's rules and Alertmanager; etcd-fsync "
        "probes of a local, a memory and a slow disk every round; alert states and dashboards",
        demo_cmd,
    ),
    Command(
        "provision",
        "provision a volume of each StorageClass as a workload would, time every step, push",
        provision_cmd,
    ),
    Command("gc", "delete Pushgateway groups of probes no longer in the configuration", gc_cmd),
    Command(
        "report",
        "comparison report (Markdown, HTML, PNG charts) over folders/archives of fio results",
        report_cmd,
    ),
    Command(
        "backfill",
        "fio results -> OpenMetrics with each run's time -> TSDB blocks (promtool)",
        backfill_cmd,
    ),
    Command(
        "distributed",
        "a benchmark plan against fio servers on several nodes: prepare, randread, randwrite; "
        "each server's figures and fio's aggregate",
        distributed_cmd,
    ),
)


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other fioprobe error: a CronJob's
    log shows the problem, not a usage screen (`--help` has that)."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        command = self.prog.removeprefix("fioprobe").strip()
        where = f"{command}: " if command else ""
        self.exit(ExitCode.USAGE, f"fioprobe: error: {where}{line} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fioprobe",
        description="fio probes of Kubernetes storage, exported to Prometheus.",
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fioprobe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        subparser = sub.add_parser(
            command.name, help=command.help, description=command.module.DESCRIPTION
        )
        command.module.add_arguments(subparser)
        subparser.set_defaults(run=command.module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every error fioprobe reports carries its own exit status."""
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return int(run(args))
    except KeyboardInterrupt:
        return _fail("interrupted", 128 + signal.SIGINT)
    except Interrupted as exc:
        return _fail(f"interrupted by {exc}; {exc.what_happened}", exc.exit_code)
    except FioprobeError as exc:
        return _fail(str(exc), exc.exit_code)


def _fail(message: str, code: int) -> int:
    print(f"fioprobe: error: {message}", file=sys.stderr)
    return code
