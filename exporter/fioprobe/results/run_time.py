"""Whether a result's run time can be a real fio run's, and how to print one that is not.

A run time comes from fio (`timestamp_ms`, `timestamp`) or, for versions that write none,
from the file's or archive member's modification time: anything can be written there. The
backfill turns run times into TSDB blocks, and Prometheus counts retention from its newest
block, so one result stamped in 2100 would make it delete every real block; one stamped in
1970 makes a block far outside any retention. Both are refused there; the report shows them
marked as implausible.
"""

from __future__ import annotations

import time

#: No fio run is older than fio: Jens Axboe started writing it in 2005, and its JSON output,
#: the only output read here, came years later (fio 2.0). The start of 2005 is a floor no real
#: result is under, yet far above what an unset clock, a zeroed tar header or an edit writes.
EARLIEST_RUN_TIME = 1_104_537_600.0  # 2005-01-01T00:00:00Z
#: How far ahead of this machine's clock a run may be: the node that ran fio and the one
#: reading its results can disagree by a few minutes; a later time is a wrong clock or an edit.
FUTURE_SLACK_SECONDS = 600.0


def run_time_problem(timestamp: float, now: float | None = None) -> str | None:
    """Why `timestamp` cannot be a fio run's time, or None when it can."""
    now = time.time() if now is None else now
    if not timestamp >= EARLIEST_RUN_TIME:  # also NaN
        return "is before 2005-01-01, before fio existed"
    if timestamp > now + FUTURE_SLACK_SECONDS:
        return f"is later than now plus {FUTURE_SLACK_SECONDS / 60:g} minutes"
    return None


def format_run_time(timestamp: float) -> str:
    """`timestamp` as UTC date and time, or as the number itself where no calendar date fits
    (a tar header can hold a time billions of years away)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
    except (OverflowError, OSError, ValueError):
        return f"{timestamp:.6g} s after 1970-01-01 UTC"
