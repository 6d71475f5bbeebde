"""How often the report's verdict calls a change that is not there, on real runs of one disk.

N identical etcd-style fio runs (2,300-byte writes, fdatasync after each, json+) are made one
after the other in one directory; then splits of them into a "baseline" and a "candidate" of
R runs each are judged by `fioprobe.report.verdict` exactly as `fioprobe report --baseline`
judges two groups. Every split compares a configuration with itself, so every regression or
improvement it calls is a false call. Three kinds of split:

- random: R + R runs drawn at random. The labels are then exchangeable, and the exact test
  with Holm's correction keeps the share of splits with a call at or below alpha (5 %) on any
  disk, whatever its noise: this row checks the code, not the disk.
- blocks: R consecutive runs, then the next R (all of A, then all of B), every window of 2R
  consecutive runs. What the disk's drift between runs made one after the other (a filling
  cache, a volume's burst credits, a neighbour's load) does to a verdict; nothing bounds it.
- interleaved: the same windows, alternating A, B, A, B (how docs/REPORT.md says to run):
  a drift falls on both groups almost alike.

The windows overlap (N - 2R + 1 of them), so their calls are not independent: the count
says whether drift shows, not a rate to the percent.

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
from fioprobe.results.load import load

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


SPLIT_KINDS = ("random", "blocks", "interleaved")


def splits(
    kind: str, count: int, size: int, random_splits: int, rng: random.Random
) -> list[tuple[list[int], list[int]]]:
    """(baseline, candidate) run indices, runs numbered in the order they were made."""
    if kind == "random":
        drawn = [rng.sample(range(count), 2 * size) for _ in range(random_splits)]
        return [(chosen[:size], chosen[size:]) for chosen in drawn]
    windows = [list(range(start, start + 2 * size)) for start in range(count - 2 * size + 1)]
    if kind == "blocks":
        return [(window[:size], window[size:]) for window in windows]
    if kind == "interleaved":
        return [(window[0::2], window[1::2]) for window in windows]
    raise ValueError(f"unknown kind of split: {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--splits", type=int, default=2000, help="random splits")
    parser.add_argument("--per-group", type=int, default=5)
    parser.add_argument("--directory", type=Path, help="where fio writes (default: a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verdict-calibration-") as scratch:
        directory = args.directory or Path(scratch) / "data"
        directory.mkdir(parents=True, exist_ok=True)
        results = Path(scratch) / "results"
        make_runs(results, directory, args.runs)
        # run-000.json, run-001.json, ...: the order they were made in
        entries = sorted(load([str(results)]).entries, key=lambda entry: entry.source)
    rng = random.Random(args.seed)
    size = args.per_group
    print(
        f"{len(entries)} identical runs, splits of {size} + {size} (alpha {vd.Settings().alpha:g}):"
    )
    for kind in SPLIT_KINDS:
        chosen = splits(kind, len(entries), size, args.splits, rng)
        calls: Counter[tuple[str, str]] = Counter()
        with_call = too_few = 0
        for base, cand in chosen:
            split = [
                *(dataclasses.replace(entries[i], group="baseline") for i in base),
                *(dataclasses.replace(entries[i], group="candidate") for i in cand),
            ]
            (verdict,) = vd.verdicts(split, "baseline")
            called = [*verdict.regressions, *verdict.improvements]
            with_call += bool(called)
            too_few += bool(verdict.too_few)
            calls.update((test.metric.key, test.verdict) for test in called)
        print(
            f"  {kind}: {with_call} of {len(chosen)} with a call "
            f"({with_call / len(chosen):.1%}), {too_few} with too few runs"
        )
        for (metric, verdict_text), count in sorted(calls.items()):
            print(f"    {metric}: {verdict_text} in {count} splits")


if __name__ == "__main__":
    main()
