"""The gp2 credit model: a dedicated gp2 probe volume's burst balance, advanced run by run.

A gp2 volume bursts to 3,000 IOPS while its credit bucket lasts (`fioprobe.target.volumes`).
For a dedicated, persistent probe volume whose only IO is the probe's own, the balance can be
modelled: credits accrue at the baseline rate between runs and each run spends what it used
above it. The balance is kept in a file of its own beside the group's state, shared by every
profile on the volume, and published as fioprobe_volume_burst_balance_ratio.
"""

from __future__ import annotations

import math
from dataclasses import replace

from fioprobe.grouping import PROFILE
from fioprobe.metrics.collector import ProbeOutcome
from fioprobe.metrics.totals import GroupTotals
from fioprobe.probe.model import ProbeTarget, RunResult
from fioprobe.publish import state
from fioprobe.publish.outcome import Adjust
from fioprobe.publish.statefile import StateFile, file_name
from fioprobe.target.volumes import CREDIT_IO_BYTES, GP2_CREDIT_BUCKET, VolumeModel, model


def credit_model(result: RunResult, target: ProbeTarget, state_file: StateFile) -> Adjust | None:
    """For a dedicated gp2 volume: advance its modelled credit balance.

    Every profile on the volume spends from the same bucket, so the credit file has a lock
    of its own (taken inside publish's lock on the group's state: always in that order).
    """
    volume = target.volume
    if volume.type != "gp2" or not volume.dedicated:
        return None
    vmodel = model("gp2", volume.size_bytes)
    volume_key = {k: v for k, v in target.grouping_key.items() if k != PROFILE}
    credits_file = state_file.directory.file(file_name(volume_key, "credits-"))

    def adjust(outcome: ProbeOutcome, _totals: GroupTotals) -> ProbeOutcome:
        run = outcome.run
        stats = [s for j in run.jobs for s in j.ops.values()] if run else []
        units = credit_units(sum(s.total_ios for s in stats), sum(s.io_bytes for s in stats))
        with credits_file.locked():  # other profiles of the volume
            previous = state.load_credits(credits_file)
            balance = next_gp2_balance(
                vmodel,
                previous.balance if previous else None,
                previous.at if previous else None,
                result.started_at,
                outcome.duration_seconds,
                units,
            )
            finished = result.started_at + outcome.duration_seconds
            state.save_credits(credits_file, state.VolumeCredits(balance, finished))
        return replace(outcome, volume=vmodel.gauges(balance / GP2_CREDIT_BUCKET))

    return adjust


def credit_units(ios: int, io_bytes: int) -> float:
    """IOs as EBS counts them for credits: one per IO of up to 256 KiB."""
    return float(max(ios, math.ceil(io_bytes / CREDIT_IO_BYTES)))


def next_gp2_balance(
    volume: VolumeModel,
    balance: float | None,
    balance_at: float | None,
    run_started: float,
    run_seconds: float,
    run_credit_units: float,
) -> float:
    """The modelled credit balance after one run of a dedicated gp2 probe volume.

    Credits accrue at the baseline rate while the volume idles between runs (up to the
    bucket), and a run spends what it used above the baseline during its own runtime.
    """
    assert volume.baseline_iops is not None
    if balance is None or balance_at is None:
        balance = GP2_CREDIT_BUCKET  # full at creation
    else:
        idle = max(0.0, run_started - balance_at)
        balance = min(GP2_CREDIT_BUCKET, balance + volume.baseline_iops * idle)
    spent = run_credit_units - volume.baseline_iops * run_seconds  # negative: a net gain
    return min(GP2_CREDIT_BUCKET, max(0.0, balance - spent))
