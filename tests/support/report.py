"""Checks of a `fioprobe report` against fio's own numbers, read independently with `json`
(not with fioprobe's reader): its tables, its HTML (the cells, and a load in headless
Chromium without a console error), its charts (real plots). The report tests and the
backfill tests use them.
"""

from __future__ import annotations

import html.parser
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


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
