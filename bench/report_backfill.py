"""Throughput of `fioprobe report` and `fioprobe backfill` against a notebook's pandas load;
results go to docs/BENCHMARKS.md, section "Report and backfill".

Input: 1,000 fio result files made from real fio outputs: a few short fio runs made here
(json+ with bins and plain json: fdatasync, random read at several queue depths, random
write, sequential read) and the corpus' plain-JSON files, copied into a battery layout
(`bench_<cluster>-fio-<node>/round<k>/run-<i>.json`, 4 clusters, 3 nodes) with each copy's
timestamps moved a minute apart, so that groups, nodes, repeats and a time series exist.

Measured in one process, one after the other, on the same files (warm page cache; imports
done before any clock starts):
- pandas, the way a notebook does it: `json.load` per file, `pd.json_normalize(doc["jobs"])`
  with the file's cluster/node columns, one `pd.concat`, one p99 pivot table (job x cluster);
- fioprobe's reader and grouping alone (`results.load`);
- the whole report (tables, charts, Markdown, HTML, JSON);
- the whole backfill (OpenMetrics, then promtool's blocks), and promtool's share of it.
Files per second for each, and each fioprobe figure as a ratio of the pandas one.

Run: .venv/bin/python bench/report_backfill.py [--files 1000] [--write docs/BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchdoc import write_section

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "fio-corpus"
SECTION = "## Report and backfill"

FIO_RUNS = {
    "fsync-jsonplus": ["--name=etcd-fsync", "--ioengine=sync", "--rw=write", "--bs=2300",
                       "--fdatasync=1", "--size=256k", "--output-format=json+"],
    "fsync-json": ["--name=etcd-fsync", "--ioengine=sync", "--rw=write", "--bs=2300",
                   "--fdatasync=1", "--size=256k", "--output-format=json"],
    "randread-qd1": ["--name=randread", "--ioengine=libaio", "--direct=1", "--rw=randread",
                     "--bs=4k", "--size=16m", "--iodepth=1", "--runtime=1", "--time_based",
                     "--output-format=json+"],
    "randread-qd16": ["--name=randread", "--ioengine=libaio", "--direct=1", "--rw=randread",
                      "--bs=4k", "--size=16m", "--iodepth=16", "--runtime=1", "--time_based",
                      "--output-format=json+"],
    "randwrite": ["--name=randwrite", "--ioengine=libaio", "--direct=1", "--rw=randwrite",
                  "--bs=4k", "--size=16m", "--iodepth=8", "--runtime=1", "--time_based",
                  "--output-format=json"],
    "seqread": ["--name=seqread", "--ioengine=libaio", "--direct=1", "--rw=read", "--bs=1m",
                "--size=32m", "--iodepth=4", "--runtime=1", "--time_based",
                "--output-format=json+"],
}  # fmt: skip


def real_outputs(work: Path) -> list[dict]:
    """fio documents: fresh runs here plus the corpus files that are plain JSON."""
    documents = []
    scratch = work / "fio-scratch"
    scratch.mkdir()
    for name, args in FIO_RUNS.items():
        output = work / f"{name}.json"
        subprocess.run(["fio", f"--directory={scratch}", f"--output={output}", *args],
                       check=True, capture_output=True, timeout=120)  # fmt: skip
        documents.append(json.loads(output.read_text()))
    shutil.rmtree(scratch)
    for path in sorted(CORPUS.glob("*.json")):
        if path.name.startswith("neg-"):
            continue
        try:
            documents.append(json.loads(path.read_text()))
        except json.JSONDecodeError:
            continue  # text around the JSON: a notebook's json.load could not read it
    return documents


def make_files(root: Path, documents: list[dict], count: int) -> list[Path]:
    """`count` result files in a battery layout, timestamps a minute apart per copy."""
    files = []
    base = 1_750_000_000
    for index in range(count):
        doc = copy.deepcopy(documents[index % len(documents)])
        stamp = base + index * 60
        doc["timestamp"] = stamp
        doc["timestamp_ms"] = stamp * 1000
        cluster, node = f"c{index % 4}", f"node{index % 3}"
        path = root / f"bench_{cluster}-fio-{node}" / f"round{index // 100}" / f"run-{index}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1))
        files.append(path)
    return files


def pandas_notebook(files: list[Path], drop_bins: bool = False) -> tuple[int, int]:
    """What a notebook does: load, flatten, concatenate, pivot p99 per job and cluster.
    With `drop_bins`, json+ histogram bins are removed before flattening (a careful
    notebook's shortcut: each bin would otherwise become a column)."""
    import pandas as pd

    frames = []
    for path in files:
        with open(path) as handle:
            doc = json.load(handle)
        if drop_bins:
            _drop_bins(doc)
        frame = pd.json_normalize(doc.get("jobs") or doc.get("client_stats") or [])
        folder = path.parent.parent.name
        frame["cluster"] = folder.split("_", 1)[1].split("-fio-")[0]
        frame["node"] = folder.split("-fio-")[1]
        frame["timestamp"] = doc.get("timestamp")
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    p99 = "read.clat_ns.percentile.99.000000"
    pivot = table.pivot_table(index="jobname", columns="cluster", values=p99, aggfunc="median")
    return len(table), len(table.columns) + pivot.size


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (promtool)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _drop_bins(obj: object) -> None:
    if isinstance(obj, dict):
        obj.pop("bins", None)
        for value in obj.values():
            _drop_bins(value)
    elif isinstance(obj, list):
        for value in obj:
            _drop_bins(value)


def timed(function, *args):
    """(wall seconds, CPU seconds, result). CPU time is the figure that compares: this
    machine is shared, so wall time also counts the waiting for a core."""
    wall, cpu = time.perf_counter(), _cpu()
    result = function(*args)
    return time.perf_counter() - wall, _cpu() - cpu, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--write", metavar="FILE", help="replace this section in FILE")
    args = parser.parse_args()

    # Imports before any clock starts (pandas, matplotlib and promtool's first start are
    # one-off costs, not throughput).
    import pandas  # noqa: F401
    from fioprobe.offline.backfill import backfill
    from fioprobe.report.build import ReportOptions, build_report
    from fioprobe.results.load import load

    with tempfile.TemporaryDirectory(prefix="fioprobe-bench-") as tmp:
        work = Path(tmp)
        documents = real_outputs(work)
        root = work / "battery"
        files = make_files(root, documents, args.files)
        size = sum(p.stat().st_size for p in files)
        subprocess.run(["promtool", "--version"], capture_output=True, check=True)

        w_pandas, c_pandas, (rows, cells) = timed(pandas_notebook, files)
        w_lean, c_lean, _ = timed(pandas_notebook, files, True)
        w_load, c_load, loaded = timed(load, [str(root)])
        assert loaded.files_parsed == len(files), loaded.unreadable[:3]
        w_report, c_report, result = timed(
            build_report, [str(root)], work / "report", ReportOptions()
        )
        w_tables, c_tables, _ = timed(
            lambda: build_report([str(root)], work / "report2", ReportOptions(), loaded=loaded)
        )
        w_backfill, c_backfill, filled = timed(backfill, [str(root)], work / "blocks")
        om = work / "blocks" / "fioprobe-backfill.om"
        w_promtool, c_promtool, _ = timed(
            subprocess.run,
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(om),
             str(work / "promtool-again")],
        )  # fmt: skip

    n = len(files)

    def row(what: str, wall: float, cpu: float, ratio: bool = True) -> str:
        versus = f"{c_pandas / cpu:.1f}" if ratio else ""
        return f"| {what} | {cpu:.2f} | {n / cpu:,.0f} | {wall:.2f} | {versus} |"

    lines = [
        SECTION,
        "",
        f"`bench/report_backfill.py` on {n} fio result files ({size / 1e6:.1f} MB; "
        f"{len(documents)} real fio outputs, {len(FIO_RUNS)} of them run here, the others the "
        "corpus' plain-JSON files, copied into a battery of 4 clusters x 3 nodes with distinct "
        f"timestamps), one run, one process, {platform.machine()}, {_cpus()} cores, Python "
        f"{platform.python_version()}. Files per second are per CPU second (this process and "
        "promtool): the machine is shared, so wall time (also shown) includes waiting for a "
        "core. 'x pandas' is pandas' CPU time over fioprobe's: above 1, fioprobe is faster.",
        "",
        "| what | CPU s | files/s | wall s | x pandas |",
        "|---|---:|---:|---:|---:|",
        row("pandas, as a notebook: json.load + json_normalize + concat + p99 pivot",
            w_pandas, c_pandas),
        row("pandas as above, json+ bins dropped before json_normalize", w_lean, c_lean),
        row("fioprobe reader + grouping (`results.load`)", w_load, c_load),
        row(f"`fioprobe report`: load, tables, {len(result.charts)} charts, md + html + json",
            w_report, c_report),
        row("of which everything after loading (tables, charts, writing)", w_tables,
            c_tables, ratio=False),
        row(f"`fioprobe backfill`: load, {filled.pushes} pushes, {filled.samples:,} samples, "
            f"promtool, {len(filled.blocks)} blocks", w_backfill, c_backfill),
        row("of which promtool create-blocks-from openmetrics", w_promtool, c_promtool,
            ratio=False),
        "",
        f"The pandas load ends with a {rows}-row frame of flattened columns and one pivot "
        f"table ({cells:,} columns and cells) and nothing else: no unit conversion (fio 2.x "
        "microseconds), no text around the JSON, no report. The report's own work after "
        "loading is mostly matplotlib drawing a bounded number of charts, so it grows far "
        "slower than the number of files.",
    ]  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(text, Path(args.write))
    return 0


def _cpus() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
