#!/usr/bin/env bash
# Runs the whole test suite. pytest's exit code 5 ("no tests collected") is a failure here:
# a suite that silently ran nothing must never look green.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.tools/bin:$PWD/.venv/bin:$PATH
# The whole suite (no arguments) runs two test files at a time (pytest-xdist, one worker per
# core of CI's 2-core machine): most of its time is waiting on real servers, fio and slow
# disks, not CPU. A file stays on one worker, so a module's fixture (one apiserver, one
# Prometheus) is built once. With arguments (a file, `-k`, `-s`), pytest runs as given.
if [[ $# -eq 0 ]]; then
  set -- -n "${FIOPROBE_TEST_WORKERS:-2}" --dist loadfile
fi
# --durations: every run (CI's too) says where its time went, for docs/BENCHMARKS.md.
.venv/bin/python -m pytest --durations=40 --durations-min=5 "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "run-tests: pytest collected no tests; failing on purpose" >&2
  exit 1
fi
exit $rc
