"""`make demo`'s command: real Pushgateway + Prometheus, probes, a summary, and a clean exit."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def still_answering(output: str) -> list[str]:
    """The demo's Pushgateway and Prometheus URLs that still accept connections."""
    urls = re.findall(r"(?:Pushgateway|Prometheus) (http://127\.0\.0\.1:\d+)", output)
    assert len(urls) == 2, output[:300]
    answering = []
    for url in urls:
        host, port = url.removeprefix("http://").split(":")
        with socket.socket() as sock:
            sock.settimeout(2)
            if sock.connect_ex((host, int(port))) == 0:
                answering.append(url)
    return answering


def own_directories(output: str) -> list[Path]:
    """The directories this demo said it uses (its work directory and /dev/shm target)."""
    probing = next(line for line in output.splitlines() if "probing " in line)
    paths = re.findall(r"(/\S+?fioprobe-demo-[^/,\s]+)", probing)
    assert len(paths) == 2, probing
    return [Path(p) for p in paths]


def test_demo_runs_rounds_prints_summary_and_cleans_up() -> None:
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
    assert [path for path in own_directories(out) if path.exists()] == []
    assert still_answering(out) == []


def test_ctrl_c_stops_everything_and_removes_its_files() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", "demo", "--interval", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        header = ""
        for _ in range(200):  # bounded: the first round comes within seconds
            line = process.stdout.readline()
            header += line
            if line.startswith("--- probe round") or not line:
                break
        assert line.startswith("--- probe round"), line
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "stopping" in rest
    assert [path for path in own_directories(header) if path.exists()] == []
    assert still_answering(header) == []
