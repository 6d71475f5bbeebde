"""Several documents in one stream (--status-interval), and text around the JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fioprobe.fio.parse import FioOutputError, parse_file, parse_text


@pytest.fixture(scope="module")
def status_stream(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Real fio writing a JSON document every second, then its final one."""
    work = tmp_path_factory.mktemp("status")
    result = subprocess.run(
        ["fio", "--name=s", f"--directory={work}", "--rw=randwrite", "--bs=4k", "--size=8m",
         "--time_based", "--runtime=3", "--status-interval=1", "--output-format=json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return result.stdout


def documents(text: str) -> list[dict]:
    decoder, position, found = json.JSONDecoder(), 0, []
    while (start := text.find("{", position)) != -1:
        obj, position = decoder.raw_decode(text, start)
        found.append(obj)
    return found


def test_status_interval_uses_the_last_complete_document(status_stream: str) -> None:
    docs = documents(status_stream)
    assert len(docs) >= 3, "fio wrote fewer interval documents than expected"
    run = parse_text(status_stream)
    final = docs[-1]["jobs"][0]["write"]
    assert run.jobs[0].ops["write"].total_ios == final["total_ios"]
    assert final["total_ios"] > docs[0]["jobs"][0]["write"]["total_ios"]


def test_a_truncated_last_document_falls_back_to_the_previous(status_stream: str) -> None:
    cut = status_stream[: status_stream.rindex('"jobs"')]  # the final document, cut short
    docs = documents(cut[: cut.rindex("\n{\n")])
    run = parse_text(cut)
    assert run.jobs[0].ops["write"].total_ios == docs[-1]["jobs"][0]["write"]["total_ios"]


def test_text_before_and_after_and_a_foreign_object(status_stream: str) -> None:
    final = status_stream[status_stream.rindex("\n{\n") + 1 :]  # fio's documents start at column 0
    wrapped = (
        'METADATA START {"pods": 1}\n{"not": "fio"}\nfio: some warning\n'
        + final
        + "\nRun status group 0 (all jobs):\n  WRITE: bw=...\n"
    )
    assert parse_text(wrapped).jobs[0].name == "s"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no fio JSON output found (empty input)"),
        ('{"jobs": [1]}', "jobs[0] is not an object"),
        ('{"jobs": []}', "fio output has no jobs"),
        ('{"a": 1}', 'JSON found, but not fio output (no "jobs" list)'),
        ('{"jobs": [{"jobname": "j", "read": {"iops": "fast"}}]}',
         "jobs[0].read.iops is not a number: 'fast'"),
        ('{"jobs": [{"jobname": "j", "write": {"total_ios": 1, "clat_ns": {"min": 1, "max": 2,'
         ' "mean": 1, "bins": {"x": 1}}}}]}',
         "jobs[0].write.clat_ns.bins has a key that is not a latency"),
        ('{"jobs": [{"jobname": "j", "write": {"total_ios": -3}}]}',
         "jobs[0].write.total_ios is negative: -3"),
    ],
)  # fmt: skip
def test_malformed_structures_are_rejected_precisely(text: str, problem: str) -> None:
    with pytest.raises(FioOutputError) as caught:
        parse_text(text, source="input.json")
    assert str(caught.value) == f"input.json: {problem}"


@pytest.mark.parametrize(
    ("count", "shown"),
    [("true", "True"), ("false", "False"), ("1.5", "1.5"), ('"3"', "'3'"), ("null", "None"),
     # orjson reads an integer beyond 64 bits as a float
     ("-1", "-1"), ("[1]", "[1]"), (str(2**64), "1.8446744073709552e+19")],
)  # fmt: skip
def test_every_kind_of_bad_bin_count_is_named(count: str, shown: str) -> None:
    """Counts are checked in bulk, at C speed; each kind of bad one is still named."""
    good = ", ".join(f'"{1000 * n}": {n}' for n in range(1, 200))
    text = (
        f'{{"jobs": [{{"jobname": "j", "write": {{"total_ios": 1, "clat_ns": '
        f'{{"min": 1, "max": 2, "mean": 1, "bins": {{{good}, "999999": {count}}}}}}}}}]}}'
    )
    with pytest.raises(FioOutputError) as caught:
        parse_text(text, source="in.json")
    assert (
        str(caught.value) == f"in.json: jobs[0].write.clat_ns.bins.999999 is not a count: {shown}"
    )


def test_reader_reads_a_file_argument(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(FioOutputError, match=r"nope\.json: cannot read: No such file"):
        parse_file(path)
