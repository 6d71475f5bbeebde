"""How often the report's verdict calls a change that is not there, on real runs of one disk.

N identical etcd-style fio runs (2,300-byte writes, fdatasync after each, json+) are made one
after the other in one directory; then S random splits of them into a "baseline" and a
"candidate" of R runs each are judged by `fioprobe.report.verdict` exactly as `fioprobe
report --baseline` judges two groups. Every split is a comparison of a configuration with
itself, so every regression or improvement it calls is a false call: the share of splits
with any call is the family-wise error rate the verdict promises to keep at alpha (5 %).
The disk's own noise (a shared host disk, a Ceph RBD volume) is what the runs carry, which
is the point: the test must hold on the disk as it is, not on a quiet one.

Run: .venv/bin/python bench/verdict_calibration.py [--runs 30] [--splits 2000] [--per-group 5]
     [--directory DIR]   # a directory on the disk to measure (default: a temporary one)
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from fioprobe.report import verdict as vd
from fioprobe.report.load import load

JOB = ["--name=etcd-fsync", "--ioengine=sync", "--rw=write", "--bs=2300", "--fdatasync=1",
       "--size=256k", "--unlink=1"]  # fmt: skip


def make_runs(results: Path, directory: Path, count: int) -> None:
    results.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        output = results / f"run-{index:03d}.json"
        subprocess.run(
            ["fio", f"--directory={directory}", "--output-format=json+", f"--output={output}",
             *JOB],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--splits", type=int, default=2000)
    parser.add_argument("--per-group", type=int, default=5)
    parser.add_argument("--directory", type=Path, help="where fio writes (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verdict-calibration-") as scratch:
        directory = args.directory or Path(scratch) / "data"
        directory.mkdir(parents=True, exist_ok=True)
        results = Path(scratch) / "results"
        make_runs(results, directory, args.runs)
        entries = load([str(results)]).entries
    rng = random.Random(args.seed)
    size = args.per_group
    calls: Counter[tuple[str, str]] = Counter()
    with_call = too_few = 0
    for _ in range(args.splits):
        chosen = rng.sample(entries, 2 * size)
        split = [
            dataclasses.replace(entry, group="baseline" if index < size else "candidate")
            for index, entry in enumerate(chosen)
        ]
        (verdict,) = vd.verdicts(split, "baseline")
        called = [*verdict.regressions, *verdict.improvements]
        with_call += bool(called)
        too_few += bool(verdict.too_few)
        calls.update((test.metric.key, test.verdict) for test in called)
    print(
        f"{len(entries)} identical runs, {args.splits} random splits of {size} + {size}: "
        f"{with_call} with a call ({with_call / args.splits:.1%}; alpha "
        f"{vd.Settings().alpha:g}), {too_few} with too few runs"
    )
    for (metric, verdict_text), count in sorted(calls.items()):
        print(f"  {metric}: {verdict_text} in {count} splits")


if __name__ == "__main__":
    main()
