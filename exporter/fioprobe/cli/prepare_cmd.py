"""`fioprobe prepare-dirs`: the init container that hands a node's hostPath directories to
the probe's user.

The probe runs as an unprivileged user, but the directories it keeps on a node (the etcd
probe directory, the state directory) are hostPath volumes the kubelet creates as
root:root 0755. An init container running as uid 0 with CAP_CHOWN and CAP_FOWNER only runs
this command once per pod start; the checks that keep it from handing someone else's
directory to the probe are in fioprobe.probe.prepare.
"""

from __future__ import annotations

import argparse
import sys

from fioprobe.cli.argtypes import whole
from fioprobe.errors import ExitCode

DESCRIPTION = (
    "Make each hostPath directory mounted in this container owner UID:UID, mode 0700, for the "
    "probe (the deployment's init container, as uid 0 with CAP_CHOWN and CAP_FOWNER). Every "
    "path is checked first and nothing is changed unless all pass: MOUNT must be the mount "
    "of HOSTPATH itself (not reached through a symlink on the node, as /proc/self/mountinfo "
    "shows), and either the probe's already or an empty directory of root's. A filesystem's "
    "root is only accepted when already prepared. Refused paths are listed on stderr, exit 2."
)
#: `--owner`: any uid but root's, within what every Linux filesystem stores.
_owner = whole(1, 2**31 - 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        required=True,
        action="append",
        metavar="MOUNT=HOSTPATH",
        help="where a hostPath volume is mounted in this container = its path on the node, "
        "both absolute and normalised (repeat for every directory)",
    )
    parser.add_argument(
        "--owner",
        required=True,
        type=_owner,
        metavar="UID",
        help="the probe's uid, 1 to 2147483647; the directories get it as uid and gid",
    )


def run(args: argparse.Namespace) -> int:
    from fioprobe.probe.prepare import parse_path, prepare_dirs

    pairs = [parse_path(text) for text in args.path]
    outcome = prepare_dirs(pairs, args.owner)
    for line in outcome.done:
        print(line)
    for pair in outcome.untouched:
        print(f"not changed {pair.shown}: it passed, but another path was refused")
    for refusal in outcome.refused:
        print(
            f"fioprobe: error: prepare-dirs: refused {refusal.pair.shown}: {refusal.reason}; "
            "nothing was changed",
            file=sys.stderr,
        )
    # A refusal is a deployment whose hostPath is not what it says (a symlink, someone
    # else's directory): a configuration error, and nothing was changed, which is what exit
    # 2 means for every command; exit 1 would say a probe ran and its failure was pushed.
    return ExitCode.USAGE if outcome.refused else ExitCode.OK
