"""Benchmarks of the exporter core; results go to docs/BENCHMARKS.md.

1. `fioprobe convert` work (`fioprobe.offline.convert.convert_text`, the function the command runs:
   read + model + merge + text exposition) on a large json+ file made by real fio (64 jobs,
   bins) against a bare `json.loads` of the same bytes, as a ratio of best-of-N times
   measured in the same run. Goal: within 2x.
2. Wall time and peak RSS of one `fioprobe push` (a new process, as a CronJob runs it) of a
   typical etcd-fsync result into a real Pushgateway. Goal: under 0.5 s and 60 MiB.

Run: PYTHONPATH=tests .venv/bin/python bench/exporter_bench.py   (prints a Markdown section)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchdoc import write_section
from fioprobe.fio.parse import parse_text
from fioprobe.fio.profiles import load_profile
from fioprobe.offline.convert import convert_text
from support import services

REPEATS = 15
CONVERT_ROUNDS = 40


def big_json_plus(work: Path, size: str) -> str:
    """64 jobs (numjobs, no group_reporting) of random read/write, json+ with bins.

    The bigger `size`, the more IOs per job and the more distinct latency bins.
    """
    output = work / f"big-{size}.json"
    subprocess.run(
        ["fio", "--name=big", f"--directory={work}", "--numjobs=64", "--rw=randrw",
         "--bs=4k", f"--size={size}", "--ioengine=psync", "--output-format=json+",
         f"--output={output}", "--unlink=1"],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    return output.read_text()


def convert_row(text: str) -> tuple[str, float, float, float, float]:
    """(description, json.loads, read + model, whole convert, ratio) for one file."""
    doc = json.loads(text)
    bins = sum(
        len(job[op]["clat_ns"].get("bins", {}))
        for job in doc["jobs"] for op in ("read", "write")
    )  # fmt: skip
    raw = text.encode()
    # Interleaved, best of many: the three are measured under the same machine conditions,
    # so drift on a shared host does not skew their ratio.
    times: dict[str, list[float]] = {"json": [], "read": [], "convert": []}
    steps = {
        "json": lambda: json.loads(raw),
        "read": lambda: parse_text(text),
        "convert": lambda: convert_text(text, "big.json"),
    }
    for _ in range(CONVERT_ROUNDS):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - started)
    t_json, t_read, t_convert = (min(times[name]) for name in ("json", "read", "convert"))
    what = f"{len(doc['jobs'])} jobs, {bins} bins, {len(raw) / 1e6:.1f} MB"
    return what, t_json, t_read, t_convert, t_convert / t_json


#: Runs one Python process and prints its exit status, wall time and peak RSS (KiB). Linux
#: folds the parent's own peak RSS into a child's ru_maxrss when the child execs (and
#: subprocess forks with vfork), so a child of this large benchmark process would report
#: the benchmark's size. A small launcher in between gives the child's own peak.
_LAUNCHER = """
import os, sys, time
started = time.perf_counter()
pid = os.spawnv(os.P_NOWAIT, sys.executable, [sys.executable, *sys.argv[1:]])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), time.perf_counter() - started, usage.ru_maxrss)
"""


def measured_process(*args: str) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of `python *args`, run as a new process."""
    result = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *args],
        capture_output=True, text=True, check=True, timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    status, wall, peak_kib = result.stdout.split()
    if status != "0":
        raise RuntimeError(f"python {' '.join(args)} exited {status}")
    return float(wall), int(peak_kib)


def etcd_fsync_result(work: Path) -> Path:
    profile = load_profile("etcd-fsync")
    job = work / "probe.fio"
    run_dir = work / "run"
    run_dir.mkdir()
    job.write_text(profile.render(run_dir))
    output = work / "etcd-fsync.json"
    subprocess.run(["fio", "--output-format=json+", f"--output={output}", str(job)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return output


def main() -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = [convert_row(big_json_plus(work, size)) for size in ("4m", "32m")]

        result = etcd_fsync_result(work)
        gateway = services.pushgateway(work / "pgw").start()
        walls, rss = [], []
        try:
            for _ in range(REPEATS):
                wall, peak_kib = measured_process(
                    "-m", "fioprobe", "push", str(result), "--gateway", gateway.url,
                    "--storageclass", "bench", "--profile", "etcd-fsync", "--quiet",
                    "--state", str(work / "state.json"),
                )  # fmt: skip
                walls.append(wall)
                rss.append(peak_kib)
        finally:
            gateway.stop()
        peak_mib = max(rss) / 1024  # ru_maxrss is in KiB on Linux
        bare_mib = measured_process("-c", "pass")[1] / 1024
        print("## Exporter core\n")
        print(f"Machine: {os.cpu_count()} cores, load average {load_before:.1f} before the run "
              "(the run's own 64-job fio makes it rise).\n")  # fmt: skip
        print(f"Convert, best of {CONVERT_ROUNDS} interleaved rounds (seconds); goal: "
              "`fioprobe convert` within 2x of a bare `json.loads` of the bytes.\n")  # fmt: skip
        print("| file (real fio json+) | json.loads | read into model | whole convert | ratio |")
        print("|---|---|---|---|---|")
        for what, t_json, t_read, t_convert, ratio in rows:
            print(f"| {what} | {t_json:.4f} | {t_read:.4f} | {t_convert:.4f} | "
                  f"**{ratio:.2f}x** |")  # fmt: skip
        worst = max(row[4] for row in rows)
        reads = [row[2] / row[1] for row in rows]
        print(f"\nVerdict: {'met' if worst <= 2 else 'NOT met'} (worst {worst:.2f}x). Reading "
              f"the output into the typed model alone (orjson fast path, bulk-validated bins, "
              f"each distinct bin key converted once) is {min(reads):.2f}-{max(reads):.2f}x of "
              "`json.loads`; the rest is merging into the cumulative histograms, collecting "
              "the families, and writing the 64 jobs' last-run series (about 1,100 lines) "
              "with `fioprobe.metrics.exposition`, which checks each name once per family where "
              "prometheus_client's `generate_latest` checks it per sample (output identical "
              "byte for byte, tests/metrics/test_exposition.py).")  # fmt: skip
        print()
        print(f"Push: one `fioprobe push` process of an etcd-fsync result into a real "
              f"Pushgateway, {REPEATS} runs. Peak RSS is the push process's own, measured "
              "through a small launcher (until November 2026 this benchmark read it from a "
              "direct child, which folds the benchmark's own peak in: 37 to 44 MiB then)."
              "\n")  # fmt: skip
        print("| measure | value | goal |\n|---|---|---|")
        print(f"| wall time, median | {statistics.median(walls):.3f} s | |")
        print(f"| wall time, max | {max(walls):.3f} s | < 0.5 s |")
        print(f"| peak RSS (max over runs) | {peak_mib:.1f} MiB | < 60 MiB |")
        print(f"| for scale: a bare `python -c pass` | {bare_mib:.1f} MiB | |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/BENCHMARKS.md")
    arguments = parser.parse_args()
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main()
    print(buffer.getvalue())
    if arguments.write:
        write_section(buffer.getvalue())
