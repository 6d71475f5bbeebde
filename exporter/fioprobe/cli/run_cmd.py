"""`fioprobe run`: every target and profile of a configuration, once or on a schedule.

The entrypoint of the deployment: the CronJob runs it once, the DaemonSets with --every
(the etcd members' one with --members-label or --member as well, so that they take turns).
The configuration file says what to probe and where to push; the options only pick this
node's share and the schedule.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fioprobe.cli import options
from fioprobe.cli.argtypes import whole
from fioprobe.errors import UsageError

DESCRIPTION = (
    "Run every target and profile of a YAML configuration once, in order, pushing each result."
)
#: `--cycles`: how many intervals of --every before it stops.
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
        "(the per-node DaemonSet's mode), or in this node's slot with --member or "
        "--members-label (the etcd members' mode); without it, run once",
    )
    parser.add_argument(
        "--cycles",
        type=_cycles,
        metavar="N",
        help="with --every: stop after N intervals, 1 to 1000000, whether this node ran in "
        "them or not (default: never)",
    )
    members = parser.add_mutually_exclusive_group()
    members.add_argument(
        "--members-label",
        action="append",
        metavar="LABEL",
        help="with --every: the etcd members are the nodes that carry any of these label "
        "keys (repeatable), read from the Kubernetes API before every run (get/list on "
        "nodes); the interval is cut into one slot per member, by name, and this node runs "
        "only in its own, never two members at once",
    )
    members.add_argument(
        "--member",
        action="append",
        metavar="NODE",
        help="with --every: the etcd members, listed (repeatable), without the API; slots "
        "as with --members-label",
    )


def run(args: argparse.Namespace) -> int:
    from fioprobe.probe.runner import run_config
    from fioprobe.target.config import load_config

    staggered = bool(args.members_label or args.member)
    _check_members(args.members_label or [], args.member or [])
    if staggered and args.every is None:
        which = "--members-label" if args.members_label else "--member"
        raise UsageError(f"run: {which} takes turns in every interval: give --every SECONDS")
    if staggered and not args.node:
        raise UsageError(
            "run: --members-label/--member need this node's name: give --node NODE or set "
            "NODE_NAME (the downward API's spec.nodeName)"
        )
    jobs_dir = options.jobs_dir(args)
    config = load_config(Path(args.config), jobs_dir)
    if staggered:
        from fioprobe.probe import members as kept
        from fioprobe.probe import schedule

        members: kept.Members
        if args.member:
            members = kept.ListedMembers(tuple(args.member))
        else:
            from fioprobe.kube.errors import KubeConfigError

            try:
                members = kept.labelled_members(config, args.members_label)
            except KubeConfigError as exc:
                raise UsageError(f"run: --members-label reads the Kubernetes API: {exc}") from None
        return schedule.run_staggered(config, args.every, members, node=args.node,
                                      jobs_dir=jobs_dir, quiet=args.quiet,
                                      cycles=args.cycles)  # fmt: skip
    if args.every is not None:
        from fioprobe.probe.schedule import run_every

        return run_every(config, args.every, only_node=args.node, jobs_dir=jobs_dir,
                         quiet=args.quiet, cycles=args.cycles)  # fmt: skip
    return run_config(config, only_node=args.node, jobs_dir=jobs_dir, quiet=args.quiet)


def _check_members(labels: list[str], nodes: list[str]) -> None:
    """Each --members-label a label key (it becomes the whole labelSelector, so it must not
    be a selector of its own) and each --member a node name; checked here rather than as an
    argparse type, which the command line keeps for numbers."""
    from fioprobe.kube.nodes import label_key_problem, node_name_problem

    for option, values, check in (
        ("--members-label", labels, label_key_problem),
        ("--member", nodes, node_name_problem),
    ):
        for value in values:
            problem = check(value)
            if problem is not None:
                raise UsageError(f"run: {option} {value!r:.80} {problem}")
