"""Shared fixtures: real Pushgateway and Prometheus processes, the fio corpus, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import services
from support.paths import REPO, TEST_DATA  # noqa: F401 - tests import REPO from here
from support.services import wait_for  # noqa: F401 - tests import it from here

#: Real fio outputs (and SOURCES.tsv, where each came from), kept inside the repository so a
#: fresh clone runs the tests: nothing outside the repository is read.
CORPUS = TEST_DATA / "fio-corpus"


def corpus_files(negative: bool) -> list[Path]:
    files = sorted(p for p in CORPUS.iterdir() if p.name != "SOURCES.tsv")
    return [p for p in files if p.name.startswith("neg-") == negative]


@pytest.fixture(autouse=True)
def short_push_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that does not own its group waits a settle time after its push before it
    checks that no concurrent push replaced it (fioprobe.publish.outcome, 1 s by default). Nearly
    every test pushes with a new state, so the suite waits 50 ms; the tests of concurrent
    writers set the default back where they race."""
    monkeypatch.setenv("FIOPROBE_PUSH_SETTLE_SECONDS", "0.05")


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Default state files go here, never into the real home directory: the state of a
    probe on a shared volume (every target not declared dedicated) lives in the per-user
    state directory, and one test's counters must not continue in the next."""
    path = tmp_path / "state"
    monkeypatch.setenv("FIOPROBE_STATE_DIR", str(path))
    return path


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[services.Service]:
    service = services.pushgateway(tmp_path / "pushgateway").start()
    yield service
    service.stop()


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator[object]:
    """Factory: a Prometheus scraping the given {job: host:port} targets every second."""
    started: list[services.Service] = []

    def start(targets: dict[str, str], **options: object) -> services.Service:
        service = services.prometheus(tmp_path / f"prometheus{len(started)}", targets, **options)
        started.append(service.start())
        return service

    yield start
    for service in started:
        service.stop()


def fioprobe(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    """Run the real CLI in a subprocess, as a user or a CronJob would."""
    return subprocess.run(
        [sys.executable, "-m", "fioprobe", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_fio_json_plus(directory: Path, *options: str, name: str = "job") -> Path:
    """Run real fio with json+ output in `directory`; returns the output file."""
    output = directory / f"{name}.json"
    subprocess.run(
        ["fio", f"--name={name}", f"--directory={directory}", "--output-format=json+",
         f"--output={output}", *options],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    return output


def gateway_group(gateway: services.Service, **labels: str) -> dict[str, list[dict]] | None:
    """The metrics of one Pushgateway group (job=fioprobe + labels), from its JSON API.

    Returns {metric name: [metric entries]} or None when the group does not exist.
    """
    import json
    import urllib.request

    with urllib.request.urlopen(gateway.url + "/api/v1/metrics", timeout=5) as response:
        groups = json.load(response)["data"]
    for group in groups:
        if group["labels"] == {"job": "fioprobe", **labels}:
            return {
                name: family["metrics"]
                for name, family in group.items()
                if isinstance(family, dict) and "metrics" in family
            }
    return None


def gauge(group: dict[str, list[dict]], name: str) -> float:
    (metric,) = group[name]
    return float(metric["value"])
