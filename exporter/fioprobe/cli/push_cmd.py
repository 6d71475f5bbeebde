"""`fioprobe push`: merge one fio output into its group's cumulative totals and push them.

For fio runs made elsewhere (a job of one's own, a CI step): the run becomes what a `probe`
would have pushed, merged into the totals kept in the group's state file (or read back from
the Pushgateway), so counters only ever grow. A push that fails keeps the run in the state
file for the next one.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe.cli import options
from fioprobe.errors import ExitCode

if TYPE_CHECKING:
    from fioprobe.publish.statefile import StateFile

DESCRIPTION = (
    "Merge one fio output into the cumulative totals of its Pushgateway group "
    "(job=fioprobe, storageclass, profile[, node]) and PUT them."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_input_argument(parser)
    options.add_group_options(parser, required=True)
    options.add_etcd_disk_option(parser, "not published, unknown")
    parser.add_argument(
        "--state",
        metavar="FILE",
        help="cumulative state file (default: $FIOPROBE_STATE_DIR or ~/.local/state/fioprobe, "
        "one file per group); without one, totals are read back from the Pushgateway",
    )
    options.add_quiet_option(parser, "progress line")
    options.add_owner_option(parser)
    options.add_gateway_options(parser)


def run(args: argparse.Namespace) -> int:
    from fioprobe.fio.parse import parse_text
    from fioprobe.gateway.transport import PushError
    from fioprobe.offline.convert import file_outcome
    from fioprobe.publish.outcome import publish
    from fioprobe.publish.statefile import default_state_file

    key = options.grouping_key(args)
    transport = options.transport(args)
    text, name = options.read_input(args.file)
    fio_run = parse_text(text, source=name)  # raises before anything is merged or pushed
    outcome = replace(file_outcome(fio_run), owner=options.owner(args), etcd_disk=args.etcd_disk)
    state_file = _state_file(args.state) if args.state else default_state_file(key)
    # The run's time is this machine's clock at the push: a fio file's own timestamp can be
    # years off, and last_success_timestamp must not jump back or forward with it.
    try:
        publish(outcome, key, transport, state_file, finished_at=time.time(),
                lease_seconds=args.writer_lease)  # fmt: skip
    except PushError as exc:
        raise PushError(
            f"{exc}; the run is kept in the state file {state_file.path} and goes with the "
            "next push"
        ) from None
    options.say(args, f"pushed {name} to {transport.url} for {key}")
    return ExitCode.OK if outcome.success else ExitCode.PROBE_FAILED


def _state_file(path: str) -> StateFile:
    """--state FILE: its folder is made if missing, then checked as every state folder is."""
    from fioprobe.publish.statefile import StateDir

    file = Path(path)
    return StateDir(file.parent, create_parents=True).file(file.name)
