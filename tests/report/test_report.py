"""`fioprobe report` over the real fio corpus, nested folders and archives.

Every number is checked against fio's own JSON, read independently with `json` (not with
fioprobe's reader). Charts are decoded and must be real plots; the HTML must load in headless
Chromium without a console error (the checks are tests/support/report.py's). The battery of
real fio runs (groups, a queue-depth sweep, a throttled run) is in test_report_battery.py.
"""

from __future__ import annotations

import io
import json
import math
import os
import pty
import select
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import CORPUS, REPO, corpus_files, fioprobe
from fioprobe.metrics.histogram import cumulative
from fioprobe.metrics.table import LATENCY_BUCKETS_SECONDS
from fioprobe.report import analysis
from fioprobe.report.format import fmt_ms
from fioprobe.results import discover
from fioprobe.results.load import Grouping, load
from support.corpus import EXPECTED_ERRORS, raw_document
from support.report import (
    check_html_in_chromium,
    check_html_matches_data,
    check_png,
    check_tables_against_fio,
    chromium_load,
    console_errors,
    fio_jobs,
    fio_value,
)

GOOD = corpus_files(negative=False)
NEGATIVE = corpus_files(negative=True)


# --- the detector itself is proven to see errors ------------------------------------------


def test_chromium_check_sees_errors_and_broken_images(tmp_path: Path) -> None:
    """The headless check is not vacuous: a script error and a broken image are caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!doctype html><html><body><table><tr><td>1</td></tr></table>"
        '<img src="data:image/png;base64,AAAA"><script>undefinedFunction();</script>'
        "</body></html>"
    )
    copy = tmp_path / "copy"
    copy.mkdir()
    with pytest.raises(AssertionError):
        check_html_in_chromium(page, copy)
    _, log = chromium_load(page)
    assert any("undefinedFunction" in line for line in console_errors(log))


# --- the corpus ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, object]:
    out = tmp_path_factory.mktemp("corpus-report")
    result = fioprobe("report", str(CORPUS), "-o", str(out))
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads((out / "report.json").read_text())
    return out, data, result


def test_corpus_report_lists_negative_files_with_their_reason(corpus_report) -> None:
    out, data, result = corpus_report
    unreadable = {Path(u["name"]).name: u["reason"] for u in data["files"]["unreadable"]}
    assert set(unreadable) == {p.name for p in NEGATIVE}
    for name, expected in EXPECTED_ERRORS.items():
        assert expected in unreadable[name]
    markdown = (out / "report.md").read_text()
    html_text = (out / "report.html").read_text()
    section = markdown.split("## Unreadable files", 1)[1]
    for path in NEGATIVE:
        assert path.name in section and EXPECTED_ERRORS[path.name] in section
        assert path.name in html_text
    # ...and they did not stop it: every good file is in the report.
    sources = {Path(e["source"]).name for e in data["entries"]}
    assert sources == {p.name for p in GOOD}
    assert data["files"] == {**data["files"], "read": len(GOOD) + len(NEGATIVE),
                             "parsed": len(GOOD)}  # fmt: skip
    # stderr: one summary line naming the unreadable count; stdout is empty.
    assert result.stdout == b""
    assert f"({len(NEGATIVE)} unreadable)" in result.stderr.decode()


def test_corpus_cells_equal_fio_numbers(corpus_report) -> None:
    out, data, _ = corpus_report
    documents = {e["source"]: raw_document(Path(e["source"])) for e in data["entries"]}
    assert check_tables_against_fio(data, documents) >= 100
    # Each entry's values too (report.json), including approximations only where fio has no
    # such percentile.
    for entry in data["entries"]:
        job = fio_jobs(documents[entry["source"]])[entry["index"]]
        for op, values in entry["ops"].items():
            for metric in ("p99", "p99.9", "mean", "max", "stddev"):
                if metric in values and fio_value(job, op, metric) is not None:
                    assert values[metric] == fio_value(job, op, metric), (entry["source"], op)
    assert check_html_matches_data(out, data) >= 100


def test_corpus_charts_are_real_plots(corpus_report) -> None:
    out, data, _ = corpus_report
    assert data["charts"], "no chart"
    for chart in data["charts"]:
        check_png(out / chart)


def test_corpus_html_opens_in_chromium(corpus_report, tmp_path: Path) -> None:
    out, _, _ = corpus_report
    check_html_in_chromium(out / "report.html", tmp_path)
    html_text = (out / "report.html").read_text()
    assert "<script" not in html_text and 'src="http' not in html_text  # self-contained


# --- discovery: nested folders and archives -----------------------------------------------


def _battery_tree(root: Path) -> dict[str, tuple[str, str]]:
    """Corpus files laid out as a battery: {relative path: (group, node)}."""
    layout = {}
    good = [p for p in GOOD if "client" not in p.name]
    for index, path in enumerate(good[:8]):
        group, node = ("gp3", f"master-{index % 2}") if index < 4 else ("ceph", "worker-1")
        rel = f"etcdbench_{group}-fio-{node}/round{index % 2}/{path.name}"
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        layout[rel] = (group, node)
    (root / "etcdbench_gp3-fio-master-0" / "notes.md").write_text("not a result")
    (root / "etcdbench_gp3-fio-master-0" / "broken.json").write_text('{"jobs": [')
    return layout


def test_nested_folders_and_tar_archive_without_unpacking(tmp_path: Path) -> None:
    tree = tmp_path / "battery"
    layout = _battery_tree(tree)
    folder = load([str(tree)])
    assert {(e.group, e.node) for e in folder.entries} == set(layout.values())
    assert [u.name for u in folder.unreadable] == [
        str(tree / "etcdbench_gp3-fio-master-0" / "broken.json")
    ]
    assert {e.battery for e in folder.entries} == {"etcdbench"}

    archive = tmp_path / "incoming" / "battery.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname="battery")
    # A damaged archive next to it is listed, not fatal.
    (archive.parent / "damaged.tar.gz").write_bytes(archive.read_bytes()[:300])
    before = sorted(p.name for p in archive.parent.rglob("*"))
    packed = load([str(archive.parent)])
    assert sorted(p.name for p in archive.parent.rglob("*")) == before  # nothing unpacked
    assert {(e.group, e.node) for e in packed.entries} == set(layout.values())
    names = {e.source for e in packed.entries}
    assert all(n.startswith(str(archive) + "/battery/etcdbench_") for n in names)
    reasons = {Path(u.name).name: u.reason for u in packed.unreadable}
    assert set(reasons) == {"broken.json", "damaged.tar.gz"}
    assert "truncated" in reasons["broken.json"]
    # The same numbers either way.
    assert [(e.row, e.group, e.job.ops.keys()) for e in folder.entries] == [
        (e.row, e.group, e.job.ops.keys()) for e in packed.entries
    ]

    # The report over the archive names members by their path inside it.
    out = tmp_path / "out"
    result = fioprobe("report", str(archive), "-o", str(out), "--quiet")
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    data = json.loads((out / "report.json").read_text())
    assert set(data["groups"]) == {"gp3", "ceph"}
    assert any(t.startswith("node-") for t in data["tables"])  # gp3 has two nodes
    assert "battery.tar.gz/battery/etcdbench_gp3-fio-master-0" in (out / "report.md").read_text()


def test_nested_archive_inside_folder_and_explicit_file(tmp_path: Path) -> None:
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as tar:
        path = GOOD[0]
        info = tarfile.TarInfo(f"b1_c9-fio-h9/{path.name}")
        data = path.read_bytes()
        info.size, info.mtime = len(data), 1_600_000_000
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "more.tgz").write_bytes(inner.getvalue())
    odd = tmp_path / "fio-output.weird"
    shutil.copy(GOOD[1], odd)
    loaded = load([str(tmp_path / "results"), str(odd)])
    assert {e.group for e in loaded.entries} == {"c9", tmp_path.name}
    first = next(e for e in loaded.entries if e.group == "c9")
    if first.run.timestamp is None:
        assert first.timestamp == 1_600_000_000 and first.timestamp_origin == "file mtime"


def test_grouping_by_job_and_option(tmp_path: Path) -> None:
    by_job = load([str(CORPUS)], Grouping(by="job"))
    assert {e.group for e in by_job.entries} == {e.job.fio_name for e in by_job.entries}
    by_option = load([str(CORPUS)], Grouping(by="option:rw"))
    groups = {e.group for e in by_option.entries}
    assert "rw=randread" in groups and all(g.startswith("rw=") for g in groups)
    pattern = load([str(CORPUS)], Grouping(folder_pattern=r"^fio-(?P<group>corpus)$"))
    assert {e.group for e in pattern.entries} == {"corpus"}
    bad = fioprobe("report", str(CORPUS), "-o", str(tmp_path), "--group-by", "size")
    assert bad.returncode == 2 and b"--group-by" in bad.stderr
    bad = fioprobe("report", str(CORPUS), "-o", str(tmp_path), "--folder-pattern", "x(")
    assert bad.returncode == 2
    nothing = fioprobe("report", str(NEGATIVE[0]), "-o", str(tmp_path / "none"))
    assert nothing.returncode == 3  # no file could be read; the report still lists why
    assert NEGATIVE[0].name in (tmp_path / "none" / "report.md").read_text()


# --- progress bar: on a terminal only -----------------------------------------------------


def _run_on_pty(args: list[str], timeout: float = 120) -> tuple[int, bytes]:
    """Run the CLI with stderr (and stdout) on a pseudo-terminal; returns (rc, output)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fioprobe", *args],
        stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, close_fds=True,
    )  # fmt: skip
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    os.close(controller)
    return proc.wait(timeout=30), output


def test_progress_bar_on_terminal_only(tmp_path: Path) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for index in range(60):
        shutil.copy(GOOD[index % len(GOOD)], many / f"r{index:03d}.json")
    rc, output = _run_on_pty(["report", str(many), "-o", str(tmp_path / "tty")])
    assert rc == 0, output
    assert b"reading [" in output and b"\r" in output and b"/60" in output

    piped = fioprobe("report", str(many), "-o", str(tmp_path / "pipe"))
    assert piped.returncode == 0
    assert b"\r" not in piped.stderr and b"reading" not in piped.stderr
    assert piped.stderr.decode().count("\n") == 1  # the summary line only
    quiet = fioprobe("report", str(many), "-o", str(tmp_path / "quiet"), "--quiet")
    assert quiet.stderr == b"" and quiet.stdout == b""


# --- units --------------------------------------------------------------------------------


def test_bucket_quantile_follows_prometheus() -> None:
    counts = [0] * (len(LATENCY_BUCKETS_SECONDS) + 1)
    counts[LATENCY_BUCKETS_SECONDS.index(0.001)] = 90  # (0.0005, 0.001]
    counts[LATENCY_BUCKETS_SECONDS.index(0.01)] = 10  # (0.008, 0.01]
    cum = cumulative(counts)
    assert analysis.bucket_quantile(0.5, cum) == 0.0005 + 0.0005 * (50 / 90)
    assert analysis.bucket_quantile(0.99, cum) == 0.008 + 0.002 * (9 / 10)
    counts[-1] = 1000  # most samples above the last bound: the last finite bound
    assert analysis.bucket_quantile(0.99, cumulative(counts)) == LATENCY_BUCKETS_SECONDS[-1]
    assert math.isnan(analysis.bucket_quantile(0.5, [0] * len(counts)))


def test_step_detection() -> None:
    flat = [100.0, 104, 98, 101, 99, 103]
    assert analysis.find_step(flat) is None
    step = analysis.find_step([50000.0, 52000, 49000, 20000, 200, 201, 199, 200])
    assert step is not None and step.at in (3, 4) and step.after < 300
    assert analysis.find_step([1.0, 2.0, 3.0]) is None  # too short


def test_formatting() -> None:
    assert fmt_ms(0.00029184) == "0.2918"
    assert fmt_ms(0.0123456) == "12.35"
    assert fmt_ms(0.01) == "10.00"
    assert fmt_ms(12.5) == "12500"
    assert fmt_ms(3e-9) == "0.000003"


def test_discover_skips_hidden_and_unrelated(tmp_path: Path) -> None:
    (tmp_path / ".hidden").mkdir()
    shutil.copy(GOOD[0], tmp_path / ".hidden" / "x.json")
    shutil.copy(GOOD[0], tmp_path / "a.json")
    (tmp_path / "SOURCES.tsv").write_text("x")
    names = [item.name for item in discover.discover([tmp_path])]
    assert names == [str(tmp_path / "a.json")]
    missing = list(discover.discover([tmp_path / "nope"]))
    assert isinstance(missing[0], discover.Unreadable)


def test_cli_help_mentions_both_commands() -> None:
    result = fioprobe("--help")
    assert b"report" in result.stdout and b"backfill" in result.stdout
    assert (REPO / "docs" / "REPORT.md").exists()


def test_rerun_into_same_folder_leaves_no_stale_chart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert fioprobe("report", str(CORPUS), "-o", str(out), "--quiet").returncode == 0
    (out / "charts" / "mine.png").write_bytes(b"not ours")
    assert fioprobe("report", str(GOOD[0]), "-o", str(out), "--quiet").returncode == 0
    data = json.loads((out / "report.json").read_text())
    on_disk = sorted(f"charts/{p.name}" for p in (out / "charts").iterdir())
    assert on_disk == sorted([*data["charts"], "charts/mine.png"])
