"""Merge one outcome into its group's totals, save them, push them: the one path every
command (push, probe, run) takes, so that "no probe result is ever lost" holds everywhere.

Order matters: totals are saved *before* the push, and the push happens under the same
lock. If the push fails, the state file already holds this run, and the next successful push
carries it.

Where previous totals come from: the state file when there is one (a persistent probe
volume); otherwise they are read back from the Pushgateway group. If the Pushgateway cannot be
read either, this run is saved on its own and marked `needs_readback`: it is added to the
Pushgateway's totals once they can be read, and nothing is pushed before that (a push of the
lone run would look like a counter reset).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from . import pushgateway, state
from .collector import ProbeOutcome, registry_for
from .pushgateway import PushError, Transport
from .state import GroupTotals

ENV_STATE_DIR = "FIOPROBE_STATE_DIR"

#: A hook run inside the state lock after the merge: it may update model state kept in the
#: totals (the gp2 credit balance) and returns the outcome to push.
Adjust = Callable[[ProbeOutcome, GroupTotals], ProbeOutcome]


def default_state_path(grouping_key: dict[str, str]) -> Path:
    """Per-group state file under $FIOPROBE_STATE_DIR (default ~/.local/state/fioprobe)."""
    base = os.environ.get(ENV_STATE_DIR) or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "fioprobe"
    )
    slug = "_".join(
        f"{key}-{re.sub(r'[^A-Za-z0-9.-]', '_', value)}" for key, value in grouping_key.items()
    )
    return Path(base) / f"{slug}.json"


def publish(
    outcome: ProbeOutcome,
    grouping_key: dict[str, str],
    transport: Transport,
    state_path: Path,
    *,
    finished_at: float | None = None,
    adjust: Adjust | None = None,
) -> ProbeOutcome:
    """Merge, save, push; returns the outcome pushed.

    Raises PushError when the push fails (the run is saved and goes with the next push), and
    StateError when the state cannot be saved (the push still happens; see below).
    """
    finished_at = time.time() if finished_at is None else finished_at
    save_error: OSError | None = None
    # The push happens inside the lock: two pushes of one group reach the gateway in the
    # order of their totals, never an older total after a newer one (a false counter reset).
    with state.locked(state_path, wait=True):
        totals = state.load(state_path)
        readback_error: PushError | None = None
        if totals is None or totals.needs_readback:
            try:
                base = pushgateway.read_totals(transport, grouping_key) or GroupTotals()
                totals = base if totals is None else state.combine(base, totals)
            except PushError as exc:
                readback_error = exc
                totals = totals or GroupTotals(needs_readback=True)
        state.merge_run(totals, outcome.run, success=outcome.success, finished_at=finished_at)
        if adjust is not None:
            outcome = adjust(outcome, totals)
        try:
            state.save(state_path, totals)
        except OSError as exc:
            # A full probe volume: the old state is now stale, and using it next time would
            # push totals below the gateway's. Remove it, so the next run reads back.
            save_error = exc
            state_path.unlink(missing_ok=True)
        if readback_error is not None:
            raise readback_error
        pushgateway.push(transport, grouping_key, registry_for(outcome, totals))
    if save_error is not None:
        raise state.StateError(
            f"{state_path}: cannot save state ({save_error.strerror}); this run was pushed, "
            "and the next run reads the totals back from the Pushgateway"
        )
    return outcome
