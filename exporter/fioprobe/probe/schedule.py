"""`fioprobe run --every`: the per-node mode's loop, every node at its own offset.

Separate from `runner` (one pass over the configured targets) because only the DaemonSet
mode repeats itself; the CronJobs run one pass and leave the schedule to Kubernetes.
"""

from __future__ import annotations

import hashlib
import math
import socket
import time
from pathlib import Path

from fioprobe.errors import ExitCode
from fioprobe.probe.config import Config
from fioprobe.probe.runner import run_config, say


def spread_offset(name: str, every_seconds: float) -> float:
    """Seconds into every interval at which the probes of `name` (a node) start.

    Uniform over the interval and fixed per name, so that a thousand nodes' probes arrive at
    the Pushgateway (and at a shared Ceph cluster) spread out rather than together, and a
    node's runs stay one interval apart.
    """
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * every_seconds


def run_every(
    config: Config,
    every_seconds: float,
    *,
    only_node: str | None,
    jobs_dir: Path | None,
    quiet: bool,
    cycles: int | None = None,
) -> int:
    """The per-node mode's loop (a DaemonSet's container): every probe once per interval.

    Each node starts at its own offset inside the interval (`spread_offset` of its name),
    counted from the Unix epoch, so a restarted pod keeps its slot and nodes never bunch up.
    A slot that is missed because the previous run took longer is skipped, not run late: the
    runs of one node stay an interval apart. Ends after `cycles` runs (None: until a signal,
    which ends the current run after its failure was pushed, as in `run_config`). Returns the
    status of the last run.
    """
    if not math.isfinite(every_seconds) or every_seconds <= 0:
        raise ValueError("the interval must be a positive number of seconds")
    offset = spread_offset(only_node or socket.gethostname(), every_seconds)
    status = int(ExitCode.OK)
    done = 0
    while cycles is None or done < cycles:
        now = time.time()
        slot = math.floor((now - offset) / every_seconds + 1) * every_seconds + offset
        if not quiet:
            say(f"next run in {slot - now:.0f}s (every {every_seconds:g}s, offset {offset:.0f}s)")
        time.sleep(max(0.0, slot - time.time()))
        status = run_config(config, only_node=only_node, jobs_dir=jobs_dir, quiet=quiet)
        done += 1
    return status
