"""The continuous stream's alerts as a real Prometheus may evaluate them: every 30 s
(kube-prometheus' default) as well as every 15 s, and with the recording groups evaluated
after the alert groups, so that every record an alert reads is one evaluation old.

Why: the committed alerts/tests/continuous.yaml evaluates every 15 s with the recording groups
first (promtool's group_eval_order), but Prometheus evaluates groups independently, each on its
own timer. alerts/tests/continuous.py models both (`Timing`: its mirror reads records one
evaluation late), asserts each scenario's requirements under each timing (a 120 s hang pages
before it ends, failed scrapes neither resolve nor re-fire a page, a disk that is not etcd's
raises no etcd alert, ...), and pins the real rules to that timeline; docs/MIXIN.md's bounds
("Evaluation interval and order") are these runs'.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import continuous
import pytest
import yaml
from support import lanes
from support.paths import REPO

TESTS = REPO / "alerts" / "tests"

pytestmark = pytest.mark.timeout(lanes.TEST_SECONDS)

TIMINGS = [
    continuous.Timing(30),
    continuous.Timing(15, records_after_alerts=True),
    continuous.Timing(30, records_after_alerts=True),
]


@pytest.mark.parametrize(
    "timing",
    TIMINGS,
    ids=[f"{t.eval_s}s-{'late' if t.records_after_alerts else 'in-order'}" for t in TIMINGS],
)
def test_stream_alerts_at_other_intervals_and_orders(
    tmp_path: Path, timing: continuous.Timing
) -> None:
    document = continuous.document("continuous", timing)
    document["rule_files"] = [str((TESTS / f).resolve()) for f in document["rule_files"]]
    assert document["evaluation_interval"] == f"{timing.eval_s}s"
    order = document["group_eval_order"]
    recording = [g for g in order if "." in g]
    assert (order[: len(recording)] == recording) != timing.records_after_alerts
    path = tmp_path / "continuous.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=100000))
    proc = subprocess.run(
        ["promtool", "test", "rules", str(path)],
        capture_output=True, text=True, timeout=lanes.RUN_SECONDS, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "SUCCESS" in proc.stdout


def test_the_mirror_reads_records_one_evaluation_late_when_they_come_after() -> None:
    """The lag is what the mirror applies: a stream's Stall at 15 s in order fires one
    evaluation earlier than with the records after the alerts, and the hang (it reads the
    in-flight gauge itself) fires at the same evaluation."""
    first = {}
    for timing in (continuous.Timing(15), continuous.Timing(15, records_after_alerts=True)):
        sc = continuous.stall_scenario(timing)
        first[timing.records_after_alerts] = sc.timeline(continuous.STALL, node="control-plane-0")
    assert first[True].firing()[0] == first[False].firing()[0] + 1
    hangs = [
        continuous.hang_scenario(t).timeline(continuous.HANG, node="control-plane-0").firing()[0]
        for t in (continuous.Timing(15), continuous.Timing(15, records_after_alerts=True))
    ]
    assert hangs[0] == hangs[1]
