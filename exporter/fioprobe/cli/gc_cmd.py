"""`fioprobe gc`: delete the Pushgateway groups of probes no longer configured (the fio
probes' and the provisioning probe's).

The Pushgateway never forgets a group, so a removed target would keep its last values (and
its alerts) forever. Only groups of the owners the given configurations name are touched;
everything deleted, moved or left alone is printed, and --dry-run only prints.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fioprobe.cli import options
from fioprobe.errors import ExitCode
from fioprobe.text import printable

DESCRIPTION = (
    "The Pushgateway never forgets a group. Delete every job=fioprobe group of the "
    "configurations' owners (fioprobe_owner_info, `owner:` in each configuration) whose "
    "(storageclass, profile) no given configuration has, every job=fioprobe_provision group of "
    "those owners whose storageclass no given configuration lists in `provision: "
    "storage_classes` (node-bound ones as node-local groups; a configuration without "
    "`provision:` lists none, so every provisioning group of its owner is deleted), and their "
    "writer conflict groups once older than the writer lease. Groups of other owners, groups "
    "without an owner (unless --unowned) and groups with other labels are never touched. "
    "Node-local groups match on any node unless --node lists the nodes that still exist. See "
    "docs/GC.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        required=True,
        action="append",
        metavar="FILE",
        help="YAML configuration (repeat for every configuration of one owner or Pushgateway)",
    )
    parser.add_argument(
        "--node",
        action="append",
        metavar="NAME",
        help="a node that still exists (repeat); node-local groups of other nodes are deleted",
    )
    parser.add_argument(
        "--unowned",
        action="store_true",
        help="also delete groups without an owner (pushed before owners existed) that no "
        "given configuration has; only safe when every configuration of the Pushgateway is "
        "given or has pushed since it named its owner",
    )
    options.add_jobs_dir_option(parser)
    parser.add_argument("--dry-run", action="store_true", help="only print what would be deleted")
    options.add_quiet_option(parser, "summary")


def run(args: argparse.Namespace) -> int:
    from fioprobe.gateway.transport import redact
    from fioprobe.probe.gc import collect, transport_for
    from fioprobe.target.config import load_config

    jobs_dir = options.jobs_dir(args)
    configs = [
        load_config(Path(path), jobs_dir, probes_optional=True)
        for path in dict.fromkeys(args.config)
    ]
    result = collect(
        transport_for(configs),
        configs,
        nodes=args.node,
        dry_run=args.dry_run,
        unowned=args.unowned,
    )
    verb = "would delete" if args.dry_run else "deleted"
    for key in result.deleted:
        print(f"{verb} {_shown(key)}")
    for key, replica in result.misplaced:
        print(f"{verb} {_shown(key)} on {redact(replica)} (old copy of a group that moved)")
    for key, replicas in result.unordered:
        where = ", ".join(redact(replica) for replica in replicas)
        options.say(
            args, f"kept every copy of {_shown(key)} on {where}: none is older and behind another"
        )
    for labels in result.foreign:
        options.say(args, f"left alone (not a fioprobe grouping key): {_shown(labels)}")
    owners = sorted({owner for _, owner in result.others})
    options.say(
        args,
        f"{verb} {len(result.deleted)} groups, kept {len(result.kept)}; left alone "
        f"{len(result.others)} of other owners ({printable(', '.join(owners), 400) or 'none'}), "
        f"{len(result.unowned)} without an owner (see --unowned)",
    )
    return ExitCode.OK


def _shown(labels: dict[str, str]) -> str:
    """Labels read from the gateway, inert on one line (a label value may hold a line break
    or an escape sequence); a plain grouping key shows as its dict."""
    return printable(str(labels), 1000)
