"""The targets of `fioprobe continuous`: from a configuration file, or one from the options.

The same configuration and target definitions as `fioprobe run`, so a node's probes and
its streams cannot disagree on names, node labels or which disk holds etcd.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fioprobe.continuous.collector import StreamTarget
from fioprobe.continuous.stream import WriterSettings, make_state, serve
from fioprobe.errors import ExitCode, UsageError
from fioprobe.target.config import load_config


def settings_of(args: argparse.Namespace) -> WriterSettings:
    if args.file_size < args.write_size:
        raise UsageError(
            f"continuous: --file-size ({args.file_size}) must hold at least one write "
            f"(--write-size {args.write_size})"
        )
    return WriterSettings(
        interval_seconds=args.interval,
        write_size=args.write_size,
        file_size=args.file_size,
        stall_threshold_seconds=args.stall_threshold,
    )


def targets_of(args: argparse.Namespace, settings: WriterSettings) -> list[StreamTarget]:
    ran_on = os.environ.get("NODE_NAME") or os.uname().nodename
    if args.config:
        if args.dir or args.storageclass:
            raise UsageError("continuous: give either --config or --dir/--storageclass, not both")
        if args.etcd_disk is not None:
            raise UsageError("continuous: with --config, each target's etcd_disk says it")
        config = load_config(Path(args.config))
        node_name = args.node or os.environ.get("NODE_NAME")
        targets = []
        for target in config.targets:
            if target.node_local and not node_name:
                raise UsageError(
                    f"continuous: target {target.name} is node-local: give --node or NODE_NAME"
                )
            node = node_name if target.node_local else None
            name = target.name + (f" on {node}" if node else "")
            targets.append(
                StreamTarget(
                    storageclass=target.name,
                    directory=os.path.abspath(target.directory),
                    state=make_state(name, settings),
                    node=node,
                    etcd_disk=target.etcd_disk,
                    volume_type=target.volume.type,
                    ran_on_node=ran_on,
                    etcd_data_dir=str(target.etcd_data_dir) if target.etcd_data_dir else None,
                )
            )
        return targets
    if not (args.dir and args.storageclass):
        raise UsageError("continuous: give --config, or --dir and --storageclass")
    name = args.storageclass + (f" on {args.node}" if args.node else "")
    return [
        StreamTarget(
            storageclass=args.storageclass,
            directory=os.path.abspath(args.dir),
            state=make_state(name, settings),
            node=args.node,
            etcd_disk=bool(args.etcd_disk),
            ran_on_node=ran_on,
        )
    ]


def run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    targets = targets_of(args, settings)
    host, port = args.listen
    serve(targets, settings, host, port)
    return int(ExitCode.OK)
