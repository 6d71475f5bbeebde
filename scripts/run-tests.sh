#!/usr/bin/env bash
# Runs the whole test suite. pytest's exit code 5 ("no tests collected") is a failure here:
# a suite that silently ran nothing must never look green.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.tools/bin:$PWD/.venv/bin:$PATH
# --durations: every run (CI's too) says where its time went, for docs/BENCHMARKS.md.
.venv/bin/python -m pytest --durations=40 --durations-min=5 "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
  echo "run-tests: pytest collected no tests; failing on purpose" >&2
  exit 1
fi
exit $rc
