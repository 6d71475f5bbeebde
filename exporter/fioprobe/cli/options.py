"""The options several commands share, each declared once, with the code that reads it back.

Why one module: `push` and `probe` take the same group, owner, etcd-disk and Pushgateway
options, `report` and `backfill` the same inputs and grouping, `convert` and `push` the same
input file; declared once, their spelling, help and checks cannot drift apart between
commands. Each reader (`grouping_key`, `transport`, `owner`, ...) turns its options into the
value a command needs and raises UsageError (exit 2) for one that is wrong. Heavy modules
are imported inside the readers: building the parser stays cheap for every command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fioprobe import bounds
from fioprobe.cli.argtypes import seconds, whole
from fioprobe.errors import UsageError
from fioprobe.gateway import defaults as push_defaults
from fioprobe.grouping import probe_key

if TYPE_CHECKING:
    from fioprobe.gateway.transport import Transport
    from fioprobe.results.load import Grouping

#: `run --every`, the demo's `--interval`: below a second `run --every` runs fio back to back
#: (with an unreachable gateway, for as long as it runs); above a day nothing is meant.
interval_seconds = seconds(1, 86400)
#: `--timeout`, `--attempts`, `--writer-lease`: the ranges the configuration file takes too
#: (fioprobe.bounds says why each).
_request_seconds = seconds(*bounds.REQUEST_SECONDS)
_attempts = whole(*bounds.ATTEMPTS)
_lease_seconds = seconds(*bounds.LEASE_SECONDS)


# --- the input file (convert, push) -------------------------------------------------------


def add_input_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE|-", help="fio output (json or json+), - for stdin")


def read_input(source: str) -> tuple[str, str]:
    """(text, name) of a file argument; '-' is standard input."""
    if source == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            data, name = Path(source).read_bytes(), source
        except OSError as exc:
            raise UsageError(f"{source}: cannot read: {exc.strerror}") from None
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff"), name


# --- the group a result belongs to (convert, push, probe) --------------------------------


def add_group_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--storageclass", required=required, help="StorageClass name (or a node-local name)"
    )
    parser.add_argument("--profile", required=required, help="probe profile name (jobs/<name>.fio)")
    parser.add_argument("--node", help="node name, for node-local probes only (e.g. etcd disks)")


def grouping_key(args: argparse.Namespace) -> dict[str, str]:
    """The Pushgateway grouping key of the group options, each value checked."""
    key = probe_key(args.storageclass, args.profile, args.node)
    for name, value in key.items():
        if not value or "/" in value or not value.isprintable() or len(value) > 253:
            raise UsageError(
                f"--{name} must be a printable name without '/', at most 253 characters: "
                f"{value!r:.80}"
            )
    return key


def add_etcd_disk_option(parser: argparse.ArgumentParser, default_text: str) -> None:
    parser.add_argument(
        "--etcd-disk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether the probed disk holds etcd's data, published as fioprobe_info{etcd_disk}: "
        f"the mixin's etcd alerts select disks by it (default: {default_text})",
    )


def add_owner_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--owner",
        metavar="NAME",
        help="the configuration this group belongs to, as `owner:` in a configuration "
        "(fioprobe_owner_info); `fioprobe gc` deletes only groups of the owners it is given. "
        "Default: none (gc leaves the group alone unless --unowned)",
    )


def owner(args: argparse.Namespace) -> str | None:
    """--owner, checked as a configuration's `owner:` is."""
    from fioprobe.target.config import valid_owner

    if args.owner is not None and not valid_owner(args.owner):
        raise UsageError(
            f"--owner must be a name (letters, digits, .-_; at most 253): {args.owner!r:.80}"
        )
    result: str | None = args.owner
    return result


# --- the Pushgateway (push, probe) --------------------------------------------------------


def add_gateway_options(parser: argparse.ArgumentParser, *, writer_lease: bool = True) -> None:
    """The Pushgateway's options; `writer_lease` only for commands that push cumulative
    totals (a writer owns its group's counters for that long)."""
    group = parser.add_argument_group(
        "Pushgateway",
        "Credentials are never taken from the command line itself: the username and password "
        "come from files (--username-file/--password-file, e.g. a mounted Secret) or from "
        "FIOPROBE_PUSHGATEWAY_USERNAME and FIOPROBE_PUSHGATEWAY_PASSWORD.",
    )
    group.add_argument(
        "--gateway",
        default=os.environ.get("FIOPROBE_PUSHGATEWAY_URL"),
        metavar="URL",
        help="Pushgateway base URL, http:// or https:// (env FIOPROBE_PUSHGATEWAY_URL)",
    )
    group.add_argument("--username-file", metavar="FILE", help="file holding the basic-auth user")
    group.add_argument(
        "--password-file", metavar="FILE", help="file holding the basic-auth password"
    )
    group.add_argument("--ca-file", metavar="FILE", help="CA bundle to verify an https Pushgateway")
    group.add_argument("--cert-file", metavar="FILE", help="client certificate for mutual TLS")
    group.add_argument("--key-file", metavar="FILE", help="private key of --cert-file")
    group.add_argument(
        "--timeout",
        type=_request_seconds,
        default=push_defaults.TIMEOUT_SECONDS,
        metavar="S",
        help="deadline of each whole request: connect, send, answer; 0.1 to 600 "
        f"(default {push_defaults.TIMEOUT_SECONDS:g})",
    )
    group.add_argument(
        "--attempts",
        type=_attempts,
        default=push_defaults.ATTEMPTS,
        metavar="N",
        help=f"tries per request, 1 to 10, with exponential backoff from "
        f"{push_defaults.BACKOFF_SECONDS:g} s, on network errors and HTTP 5xx only "
        f"(default {push_defaults.ATTEMPTS})",
    )
    if not writer_lease:
        return
    group.add_argument(
        "--writer-lease",
        type=_lease_seconds,
        default=push_defaults.WRITER_LEASE_SECONDS,
        metavar="S",
        help="how long a writer's pushes make a group its own, 1 to 604800 "
        f"(default {push_defaults.WRITER_LEASE_SECONDS:g}); see docs/FAULTS.md",
    )


def transport(args: argparse.Namespace) -> Transport:
    """The Pushgateway client the gateway options describe."""
    from fioprobe.gateway.transport import Transport

    if not args.gateway:
        raise UsageError("no Pushgateway: give --gateway URL or set FIOPROBE_PUSHGATEWAY_URL")
    return Transport.from_sources(
        args.gateway,
        username_file=args.username_file,
        password_file=args.password_file,
        ca_file=args.ca_file,
        cert_file=args.cert_file,
        key_file=args.key_file,
        timeout_seconds=args.timeout,
        attempts=args.attempts,
    )


# --- fio results in bulk (report, backfill) -----------------------------------------------


def add_results_options(parser: argparse.ArgumentParser, output: str, output_help: str) -> None:
    """Their inputs, output folder, and grouping."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="fio results, folders, archives")
    parser.add_argument("-o", "--output", required=True, metavar=output, help=output_help)
    parser.add_argument(
        "--group-by",
        default="folder",
        metavar="folder|job|option:NAME",
        help="columns: the folder naming pattern's group (default), the fio job name, or the "
        "value of a fio option (e.g. option:iodepth)",
    )
    parser.add_argument(
        "--folder-pattern",
        default=None,  # results.load.DEFAULT_FOLDER_PATTERN, resolved in `grouping`: every
        metavar="REGEX",  # other command would pay for importing the report package here
        help="matched against each folder name; named groups group (or cluster), node (or "
        "host), battery (default: <battery>_<group>-fio-<node>)",
    )


def grouping(args: argparse.Namespace) -> Grouping:
    """How the results options group the results, checked."""
    from fioprobe.results.load import DEFAULT_FOLDER_PATTERN, Grouping

    result = Grouping(args.group_by, args.folder_pattern or DEFAULT_FOLDER_PATTERN)
    result.validate()
    return result


# --- small options of several commands ----------------------------------------------------


def add_jobs_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs-dir", metavar="DIR", help="where profiles live (default: jobs/)")


def jobs_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.jobs_dir) if args.jobs_dir else None


def add_quiet_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--quiet: without it, the command writes `what` (a progress line, a summary) on stderr."""
    parser.add_argument("--quiet", action="store_true", help=f"no {what} on stderr")


def say(args: argparse.Namespace, message: str) -> None:
    """One `fioprobe: ` line on stderr, unless --quiet."""
    if not args.quiet:
        print(f"fioprobe: {message}", file=sys.stderr)
