"""`fioprobe report` over the real fio corpus, nested folders and archives.

Every number is checked against fio's own JSON, read here independently with `json` (not with
fioprobe's reader). Charts are decoded and must be real plots; the HTML must load in headless
Chromium without a console error. The battery of real fio runs (groups, a queue-depth sweep,
a throttled run) is in test_report_battery.py.
"""

from __future__ import annotations

import html.parser
import io
import json
import math
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tarfile
import tempfile
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
from test_corpus import EXPECTED_ERRORS, raw_document

GOOD = corpus_files(negative=False)
NEGATIVE = corpus_files(negative=True)


# --- helpers shared with test_report_battery.py and offline/test_backfill.py --------------


def fio_jobs(doc: dict) -> list[dict]:
    """The job objects fioprobe reports, in order (the 'All clients' aggregate if present)."""
    jobs = doc.get("jobs") or doc["client_stats"]
    aggregate = [j for j in jobs if j.get("jobname") == "All clients"]
    return aggregate or jobs


def _has_data(block: dict) -> bool:
    return bool(block.get("N") or block.get("bins") or block.get("max"))


def fio_block(job: dict, op: str) -> tuple[dict, float] | None:
    """fio's latency block for `op` (sync: lat; read/write: clat, else lat) and its unit."""
    section = job.get(op)
    if not isinstance(section, dict):
        return None
    keys = ("lat_ns", "lat") if op == "sync" else ("clat_ns", "clat", "lat_ns", "lat")
    for key in keys:
        block = section.get(key)
        if isinstance(block, dict) and _has_data(block):
            return block, (1e9 if key.endswith("_ns") else 1e6)
        if isinstance(block, dict) and op == "sync":
            return None
    return None


def fio_value(job: dict, op: str, metric: str) -> float | None:
    """fio's own number in seconds: p99/p99.9 from its percentile list, mean, max, stddev."""
    found = fio_block(job, op)
    if found is None:
        return None
    block, per_second = found
    if metric in ("p99", "p99.9"):
        want = 99.0 if metric == "p99" else 99.9
        for key, value in (block.get("percentile") or {}).items():
            if float(key) == want:
                return value / per_second
        return None
    return block[{"mean": "mean", "max": "max", "stddev": "stddev"}[metric]] / per_second


def lower_median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


def check_tables_against_fio(data: dict, documents: dict[str, dict]) -> int:
    """Every latency table cell equals fio's number (one run) or the lower median of fio's
    numbers (several runs), found through the cell's sources. Returns cells checked."""
    by_source_job: dict[tuple[str, str], dict] = {}
    for entry in data["entries"]:
        doc = documents[entry["source"]]
        by_source_job[(entry["source"], entry["row"], entry["group"])] = fio_jobs(doc)[
            entry["index"]
        ]
    checked = 0
    for table_id, table in data["tables"].items():
        metric, op = table["metric"], table["op"]
        if metric not in ("p99", "p99.9", "mean", "max", "stddev"):
            continue
        if table_id.startswith("node-"):
            continue  # columns are group / node; checked through the plain tables
        for row, cells in table["rows"].items():
            for group, cell in cells.items():
                jobs = [by_source_job[(source, row, group)] for source in cell["sources"]]
                wanted = [fio_value(job, op, metric) for job in jobs]
                if cell["approx"]:
                    assert all(w is None for w in wanted), (table_id, row, group)
                    continue
                assert None not in wanted, (table_id, row, group, cell)
                assert cell["n"] == len(jobs)
                assert cell["value"] == lower_median(wanted), (table_id, row, group)
                checked += 1
    return checked


def html_cells(path: Path) -> dict[str, dict[tuple[str, int], tuple[str, float | None, str]]]:
    """{table id: {(row label, column index): (text, data-value, class)}} from the HTML."""

    class Parser(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: dict[str, dict] = {}
            self.table: str | None = None
            self.row: list[tuple[str, float | None, str]] | None = None
            self.cell: list[str] | None = None
            self.attrs: dict[str, str | None] = {}

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "table":
                self.table = dict(attrs).get("id")
                self.tables[self.table] = {}
            elif tag == "tr" and self.table is not None:
                self.row = []
            elif tag == "td" and self.row is not None:
                self.cell, self.attrs = [], dict(attrs)

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

        def handle_endtag(self, tag: str) -> None:
            if tag == "td" and self.cell is not None and self.row is not None:
                value = self.attrs.get("data-value")
                self.row.append(
                    ("".join(self.cell), float(value) if value else None,
                     self.attrs.get("class") or "")
                )  # fmt: skip
                self.cell = None
            elif tag == "tr" and self.row:
                label = self.row[0][0]
                for index, cell in enumerate(self.row[1:]):
                    self.tables[self.table][(label, index)] = cell
                self.row = None
            elif tag == "table":
                self.table = None

    parser = Parser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tables


def check_html_matches_data(outdir: Path, data: dict, warn_ms: float = 5, crit_ms: float = 10):
    """The HTML shows report.json's numbers: exact data-value, text rounded, colour class."""
    tables = html_cells(outdir / "report.html")
    markdown = (outdir / "report.md").read_text(encoding="utf-8")
    checked = 0
    for table_id, table in data["tables"].items():
        cells = tables[table_id]
        for row, values in table["rows"].items():
            for group, cell in values.items():
                text, value, cls = cells[(row, table["columns"].index(group))]
                assert value == cell["value"], (table_id, row, group)
                if table["unit"] == "seconds":
                    shown = float(re.sub(r"[^0-9.]", "", text.split(" (n=")[0]))
                    assert math.isclose(shown, cell["value"] * 1e3, rel_tol=6e-4, abs_tol=1e-6)
                    ms = cell["value"] * 1e3
                    want = "crit" if ms >= crit_ms else "warn" if ms >= warn_ms else ""
                    assert cls == want, (table_id, row, group, ms, cls)
                    assert text in markdown
                checked += 1
    return checked


def check_png(path: Path) -> None:
    """A decodable PNG of a real plot: a sensible size and many distinct colours."""
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] >= 150 and pixels.shape[1] >= 300, pixels.shape
    rgb = (pixels[..., :3] * 255).round().astype(np.uint8).reshape(-1, 3)
    colours = np.unique(rgb, axis=0)
    assert len(colours) > 20, f"{path}: only {len(colours)} colours"
    # Not one flat background: a good share of pixels is drawn.
    background = np.all(rgb == rgb[0], axis=1).mean()
    assert background < 0.97, f"{path}: {background:.1%} of pixels are background"


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000",
]  # fmt: skip

#: Appended to a *copy* of the report (the report itself has no script): reports, once the
#: page has loaded, how many images decoded and how many tables there are.
_PROBE = """<script>window.addEventListener("load", function () {
  var imgs = Array.from(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  console.log("FIOPROBE-CHECK images=" + imgs.length + " decoded=" + ok +
              " tables=" + document.querySelectorAll("table").length);
});</script>"""


def chromium_load(page: Path) -> tuple[str, str]:
    """Open `page` in headless Chromium; (dumped DOM, browser log on stderr)."""
    binary = shutil.which("chromium")
    if binary is None:
        pytest.fail("chromium is not installed (scripts/setup.d/40-report.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="fioprobe-chromium-") as profile:
        result = subprocess.run(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
             page.resolve().as_uri()],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")


def console_errors(log: str) -> list[str]:
    """Console lines that are not our probe's, plus page errors Chromium logged."""
    lines = []
    for line in log.splitlines():
        ours = ":CONSOLE" in line and "FIOPROBE-CHECK" in line
        console = ":CONSOLE" in line and not ours
        page_error = any(s in line for s in ("Uncaught", "Failed to load resource", "net::ERR_"))
        if console or page_error:
            lines.append(line)
    return lines


def check_html_in_chromium(report_html: Path, tmp_path: Path) -> None:
    """The report loads in Chromium with no console error; every image decodes."""
    copy = tmp_path / "chromium-check.html"
    copy.write_text(
        report_html.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"),
        encoding="utf-8",
    )
    dom, log = chromium_load(copy)
    assert console_errors(log) == [], console_errors(log)
    match = re.search(r"FIOPROBE-CHECK images=(\d+) decoded=(\d+) tables=(\d+)", log)
    assert match, log[-3000:]
    images, decoded, tables = map(int, match.groups())
    assert images >= 1 and decoded == images, match.group(0)
    assert tables >= 1
    assert dom.count("<table") == tables
    assert "fio results" in dom or "<h1>" in dom


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
