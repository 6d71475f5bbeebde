#!/usr/bin/env bash
# Runs every benchmark and rewrites its section of docs/BENCHMARKS.md (and the docs it
# names). Benchmarks measure; they never fail the build. Run on a quiet machine: every
# section records the load average it saw.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.tools/bin:$PWD/.venv/bin:$PATH
PY=.venv/bin/python
# Benchmarks import the test support (real fault injection, service launchers) as `support`
# and each other by name, as pytest does through pyproject's pythonpath.
export PYTHONPATH=$PWD/tests:$PWD/bench
$PY bench/exporter_bench.py --write
$PY bench/etcd_fsync_bench.py --write
$PY bench/report_backfill.py --write docs/BENCHMARKS.md
$PY bench/fidelity.py
# About 30 minutes (5-minute rounds): prints the tables of docs/SIZING.md's sharding section.
$PY bench/sharded_load.py
# About 65 minutes (root: FUSE and loop devices): stalls seen by the continuous stream and the
# scheduled probe side by side, cost, footprint, an hour on a busy host and a promtool test of
# the continuous alerts over it, all in parallel; writes its section of docs/BENCHMARKS.md.
$PY bench/continuous_stalls.py --write
