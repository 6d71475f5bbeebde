"""`convert` and `backfill` export counts exactly or not at all: a fio result whose samples
reach 2**53 (where a float count stops telling consecutive integers apart) is refused with
one line, exit 3 and nothing written, as the state file and the push refuse such totals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import CORPUS, fioprobe

JSON_PLUS = CORPUS / "fio3.39-jsonplus-bins-macos-posixaio-randwrite-extracted.json"
LIMIT = 2**53
#: Deadline for one CLI call over a file or two; generous for a loaded 2-core machine.
CLI_TIMEOUT = 120


def with_samples(path: Path, samples: int, later_by: int = 0) -> Path:
    """The real json+ result with its write bins holding `samples` in all (the largest bin
    grown) and N to match, run `later_by` seconds after the original."""
    doc = json.loads(JSON_PLUS.read_text())
    block = doc["jobs"][0]["write"]["clat_ns"]
    bins = block["bins"]
    largest = max(bins, key=lambda key: bins[key])
    bins[largest] += samples - block["N"]
    block["N"] = samples
    doc["timestamp"] += later_by
    doc["timestamp_ms"] += later_by * 1000
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def refusal(source: Path, refused: str, series: str = "") -> str:
    return (
        f"fioprobe: error: {source}{series}: the write histogram counts {LIMIT} samples, "
        f"at or above 2**53, the limit of exact counting: {refused}, nothing written\n"
    )


def test_convert_refuses_a_file_of_2_53_samples(tmp_path: Path) -> None:
    source = with_samples(tmp_path / "big.json", LIMIT)
    result = fioprobe("convert", str(source), timeout=CLI_TIMEOUT)
    assert result.returncode == 3
    assert result.stdout == b""
    assert result.stderr.decode() == refusal(source, "not converted")


def test_convert_keeps_a_file_just_below_the_limit_exact(tmp_path: Path) -> None:
    source = with_samples(tmp_path / "below.json", LIMIT - 1)
    result = fioprobe("convert", str(source), timeout=CLI_TIMEOUT)
    assert result.returncode == 0, result.stderr.decode()
    counts = [
        line.rsplit(" ", 1)[1]
        for line in result.stdout.decode().splitlines()
        if line.startswith("fioprobe_write_latency_seconds_count")
    ]
    assert [int(float(count)) for count in counts] == [LIMIT - 1]


@pytest.mark.parametrize("quiet", [False, True], ids=["default", "quiet"])
def test_backfill_refuses_a_file_of_2_53_samples(tmp_path: Path, quiet: bool) -> None:
    source = with_samples(tmp_path / "in" / "big.json", LIMIT)
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(source), "-o", str(out), *(["--quiet"] * quiet),
                      timeout=CLI_TIMEOUT)  # fmt: skip
    assert result.returncode == 3
    assert result.stderr.decode() == refusal(
        source, "backfill refused", ", with the runs before it in its series"
    )
    assert not out.exists()


def test_backfill_refuses_a_series_whose_runs_reach_the_limit_together(tmp_path: Path) -> None:
    """Each file is below the limit; the series' cumulative histogram would reach it at the
    second run, which is named."""
    first = with_samples(tmp_path / "in" / "run-1.json", LIMIT // 2, later_by=60)
    second = with_samples(tmp_path / "in" / "run-2.json", LIMIT // 2, later_by=120)
    out = tmp_path / "blocks"
    result = fioprobe("backfill", str(tmp_path / "in"), "-o", str(out), timeout=CLI_TIMEOUT)
    assert result.returncode == 3
    assert result.stderr.decode() == refusal(
        second, "backfill refused", ", with the runs before it in its series"
    )
    assert first.exists() and not out.exists()
