"""Fast fidelity checks: the etcd-fsync probe's verdict and the continuous stream's share of
slow fdatasyncs match etcd's own, on two disks.

The full benchmark (bench/fidelity.py, results in docs/FIDELITY.md) measures seven
conditions; this runs two of them with the same code (`fidelity.measure`): real etcd under
a put load, the probe CLI run twice on the same filesystem, one Prometheus scraping etcd and
the Pushgateway, both p99s from Prometheus over the same window.

Why tmpfs for the fast disk and not the host's ext4: the host disk is shared with every
other test run on this machine, and its fsync p99 measured between 10 and 19 ms (for etcd
and the probe alike) while others ran fio. That is a correct answer, but not a fixed one, so it
cannot be a test's expectation. On tmpfs fdatasync is free, so "below 10 ms" is the known
truth for both; under slowfs every fsync takes at least 15 ms, so "above" is.
"""

from __future__ import annotations

import os
from pathlib import Path

import fidelity
import fidelity_stream
import pytest
from support import benchdisk
from support import fixtures as fx

#: Two runs: the verdict after the first and after both are checked.
RUNS = 2


def _skip_unless_possible(condition: fidelity.Condition) -> None:
    if os.geteuid() != 0:
        pytest.skip("FUSE mounts with allow_other need root")
    if condition.memory and not os.path.isdir(benchdisk.MEMORY_DIR):
        pytest.skip(f"{benchdisk.MEMORY_DIR} (tmpfs) is missing")
    if condition.fsync_delay_ms is not None and (reason := fx.fuse_unavailable()):
        pytest.skip(reason)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("name", "above"), [("tmpfs", False), ("slowfs-15ms", True)])
def test_probe_verdict_agrees_with_etcd(tmp_path: Path, name: str, above: bool) -> None:
    condition = fidelity.CONDITIONS[name]
    _skip_unless_possible(condition)
    m = fidelity.measure(condition, tmp_path, runs=RUNS, solo_seconds=0, max_seconds=120)
    summary = fidelity.render_table([m], name)
    # Enough data on both sides that the p99s mean something.
    assert m.probe_runs == RUNS and m.probe_failures == 0, summary
    assert m.etcd_fsyncs >= 100, summary
    assert m.probe_fsyncs >= 500 * RUNS, summary
    assert m.put_errors == 0, summary
    # Both verdicts are the known truth of this disk, and so agree ...
    assert m.etcd_above is above, summary
    assert m.probe_above is above, summary
    assert m.agree, summary
    # ... from the first run on (the cumulative histogram after run 1, 2).
    assert m.runs_to_agree == 1, summary
    if above:  # slowfs sleeps 15 ms after every fsync: neither can see less
        assert m.etcd_p99 is not None and m.etcd_p99 >= 0.015, summary
        assert m.probe_p99 is not None and m.probe_p99 >= 0.015, summary


# --- the continuous stream against etcd (bench/fidelity_stream.py, docs/FIDELITY.md) ----------

#: The stream at 0.1 s gives about 300 fdatasyncs in 30 s: enough for a share against 1 %.
STREAM_SECONDS = 30.0
STREAM_ARGS = ["--interval=0.1"]


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("name", "above"), [("tmpfs", False), ("slowfs-15ms", True)])
def test_stream_share_above_10ms_agrees_with_etcd(tmp_path: Path, name: str, above: bool) -> None:
    """etcd and the stream on one filesystem, 30 s, both read from one Prometheus: on tmpfs
    at most 1 % of either's fdatasyncs above 10 ms, on the FUSE disk at +15 ms at least 90 %.

    etcd's histogram has no 10 ms boundary (8, then 16 ms): its share above 10 ms lies
    between its shares above 16 and above 8 ms. On tmpfs the upper bound (above 8 ms) is
    held to 1 %; on the slow disk, where every fsync sleeps 15 ms after the real one, the
    share above 8 ms is what etcd's own data can show. No p99 is asserted: at +15 ms etcd
    makes about 1,100 fdatasyncs in 30 s, and fewer on a loaded host, around the 1,000 the
    benchmark wants before it reports one.
    """
    condition = fidelity_stream.CONDITIONS[name]
    _skip_unless_possible(fidelity.CONDITIONS[name])
    r = fidelity_stream.measure(
        condition,
        tmp_path,
        streams={"stream": STREAM_ARGS},
        off_seconds=0,
        on_seconds=STREAM_SECONDS + 1,
        window_seconds=STREAM_SECONDS,
        step_seconds=STREAM_SECONDS,
        scrape="1s",
        rules=False,
    )
    summary = fidelity_stream.render([r], name)
    assert len(r.windows) == 1, summary
    etcd, stream = r.windows[0].etcd, r.windows[0].streams["stream"]
    assert r.put_errors == 0, summary
    assert etcd.n >= 200 and stream.n >= 200, summary
    if above:
        assert stream.above_lo >= 0.9 and etcd.above_hi >= 0.9, summary
        assert stream.met is False and etcd.met is not True, summary
    else:
        assert stream.above_hi <= 0.01 and etcd.above_hi <= 0.01, summary
        assert stream.met is True and etcd.met is True, summary
