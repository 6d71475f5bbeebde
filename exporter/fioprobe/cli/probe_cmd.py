"""`fioprobe probe`: run one fio profile in a directory and push the result or the failure.

The command a CronJob or a person runs against one volume without a configuration file; the
same safe run (own subdirectory, lock, free-space check, timeout, cleanup) and the same push
as each target of `fioprobe run`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from fioprobe import bounds
from fioprobe.cli import options
from fioprobe.cli.argtypes import seconds
from fioprobe.errors import UsageError

DESCRIPTION = (
    "Run jobs/<profile>.fio inside DIR (safely: own subdirectory, lock, free-space check, "
    "timeout, cleanup) and push the result or the failure."
)
#: `--probe-timeout`: the range a target's `timeout_seconds` takes too (fioprobe.bounds).
_probe_seconds = seconds(*bounds.PROBE_SECONDS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_group_options(parser, required=True)
    options.add_etcd_disk_option(parser, "not published, unknown")
    parser.add_argument("--dir", required=True, help="probe directory (fio writes only inside it)")
    parser.add_argument(
        "--require-mount-point",
        action="store_true",
        help="fail (no_directory) unless DIR is a mount point: an unmounted volume is never "
        "probed in its place",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--state",
        metavar="FILE",
        help="cumulative state file (default: one per group in the state directory)",
    )
    where.add_argument(
        "--state-dir",
        metavar="SDIR",
        help="the probe's own state directory, beside DIR, never inside it (default: "
        "DIR/.fioprobe-state/ with --dedicated, else $FIOPROBE_STATE_DIR or "
        "~/.local/state/fioprobe); checked on every open: owned by this user, writable by "
        "no one else",
    )
    parser.add_argument(
        "--dedicated",
        action="store_true",
        help="DIR is the probe's own volume, which no tenant writes: keep the state on it "
        "(default: shared, the state never lives where tenants write)",
    )
    parser.add_argument(
        "--probe-timeout",
        type=_probe_seconds,
        metavar="S",
        help="wall-clock limit around fio, 1 to 86400 (default: the profile's budgeted seconds "
        "plus a margin)",
    )
    options.add_jobs_dir_option(parser)
    options.add_quiet_option(parser, "progress line")
    options.add_owner_option(parser)
    options.add_gateway_options(parser)


def run(args: argparse.Namespace) -> int:
    from fioprobe.probe.model import ProbeTarget
    from fioprobe.probe.runner import probe_once
    from fioprobe.target.config import VolumeConfig, paths_overlap

    options.grouping_key(args)  # checked before anything is opened
    transport = options.transport(args)
    directory = os.path.abspath(args.dir)
    state_dir = os.path.abspath(args.state_dir) if args.state_dir else None
    if state_dir and paths_overlap(state_dir, directory):
        raise UsageError(
            f"--state-dir {state_dir!r:.200} must be beside --dir {directory!r:.200}, neither "
            "inside it nor holding it: tenants of the probe volume could write the state there"
        )
    target = ProbeTarget(
        storageclass=args.storageclass,
        node=args.node,
        directory=Path(args.dir),
        profile=args.profile,
        timeout_seconds=args.probe_timeout,
        require_mount_point=args.require_mount_point,
        volume=VolumeConfig(dedicated=args.dedicated),
        state_dir=Path(state_dir) if state_dir else None,
        state_path=Path(args.state) if args.state else None,
        lease_seconds=args.writer_lease,
        owner=options.owner(args),
        etcd_disk=args.etcd_disk,
    )
    return probe_once(target, transport, options.jobs_dir(args), quiet=args.quiet)
