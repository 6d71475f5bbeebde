"""`make demo`'s command: real Pushgateway + Prometheus, probes, a summary, and a clean exit."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def leftovers() -> set[str]:
    names = {p.name for p in Path(tempfile.gettempdir()).glob("fioprobe-demo-*")}
    return names | {p.name for p in Path("/dev/shm").glob("fioprobe-demo-*")}


def test_demo_runs_rounds_prints_summary_and_cleans_up() -> None:
    before = leftovers()
    result = subprocess.run(
        [sys.executable, "-m", "fioprobe", "demo", "--interval", "1", "--iterations", "3"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"Prometheus http://127\.0\.0\.1:\d+", out)
    assert out.count("--- probe round") == 3
    last_round = out.rsplit("--- probe round", 1)[1]
    # By the last round Prometheus has scraped the pushed histograms: real numbers, a verdict.
    row = next(line for line in last_round.splitlines() if line.startswith("local-disk"))
    assert "p99<=10ms" in row or "SLOW" in row, row
    assert re.search(r"\s3\s+\d+\.\dMi$", row), row  # 3 runs, bytes written
    assert leftovers() == before
    processes = subprocess.run(["pgrep", "-f", "prometheus.*fioprobe-demo"],
                               capture_output=True, text=True)  # fmt: skip
    assert processes.stdout == ""
