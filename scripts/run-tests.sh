#!/usr/bin/env bash
# Runs the whole test suite. pytest's exit code 5 ("no tests collected") is a failure here:
# a suite that silently ran nothing must never look green.
#
# With no arguments, in two lanes at once, each two test files at a time (pytest-xdist,
# `loadfile`: a module's fixture, one apiserver or one Prometheus, is built once):
# - the waiting lane: every test that runs real servers, fio, slow and hung disks, signals and
#   slots. Most of its time is waiting (a hung disk's deadline, a stagger slot), and its
#   deadlines are real time, so it runs at normal priority.
# - the CPU lane (CPU_LANE below): the mixin's promtool and jsonnet suites, pure computation
#   with no deadline but their bounds against a hang. It runs at `nice` 10: it takes the CPU
#   the waiting lane leaves idle and yields it whenever a waiting test needs it, so no
#   deadline there sees more load than two workers make. Two lanes of two workers each on a
#   2-core machine; the same four workers at one priority overloaded the timed tests
#   (docs/BENCHMARKS.md).
# With arguments (a file, `-k`, `-s`), pytest runs once, as given.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=$PWD/.tools/bin:$PWD/.venv/bin:$PATH
WORKERS=${FIOPROBE_TEST_WORKERS:-2}
CPU_LANE=(
  tests/mixin/test_mixin.py
  tests/mixin/test_mixin_schedules.py
  tests/mixin/test_mixin_evaluation.py
  tests/mixin/test_distributed_rules.py
  tests/mixin/test_provisioning.py
  tests/mixin/test_observed.py
  tests/mixin/test_mixin_metric_names.py
)

# --durations: every run (CI's too) says where its time went, for docs/BENCHMARKS.md.
pytest_run() {
  .venv/bin/python -m pytest --durations=40 --durations-min=5 "$@"
  local rc=$?
  if [[ $rc -eq 5 ]]; then
    echo "run-tests: pytest collected no tests ($*); failing on purpose" >&2
    return 1
  fi
  return $rc
}

if [[ $# -gt 0 ]]; then
  pytest_run "$@"
  exit $?
fi

for file in "${CPU_LANE[@]}"; do
  [[ -f $file ]] || { echo "run-tests: $file (CPU_LANE) does not exist" >&2; exit 1; }
done
log=$(mktemp "${TMPDIR:-/tmp}/fioprobe-cpu-lane.XXXXXX")
ignores=()
for file in "${CPU_LANE[@]}"; do ignores+=("--ignore=$file"); done
# Each lane runs in a session of its own (setsid) and is stopped as a whole with this script,
# which only waits: a signal interrupts `wait`, where a command in the foreground defers it.
setsid nice -n 10 bash -c "$(declare -f pytest_run); pytest_run \"\$@\"" cpu-lane \
  -n "$WORKERS" --dist loadfile -p no:cacheprovider "${CPU_LANE[@]}" >"$log" 2>&1 &
cpu_pid=$!
setsid bash -c "$(declare -f pytest_run); pytest_run \"\$@\"" waiting-lane \
  -n "$WORKERS" --dist loadfile "${ignores[@]}" &
waiting_pid=$!
# shellcheck disable=SC2317 # called by the traps below
stop_lanes() {
  kill -TERM -- "-$waiting_pid" "-$cpu_pid" 2>/dev/null
  wait 2>/dev/null
  rm -f "$log"
}
trap 'stop_lanes; exit 143' TERM
trap 'stop_lanes; exit 130' INT
echo "run-tests: the waiting lane; the CPU lane (${#CPU_LANE[@]} files at nice 10) prints when it ends"
wait "$waiting_pid"
waiting_rc=$?
wait "$cpu_pid"
cpu_rc=$?
trap - TERM INT
echo
echo "run-tests: the CPU lane (${CPU_LANE[*]})"
cat "$log"
rm -f "$log"
echo "run-tests: waiting lane exit $waiting_rc, CPU lane exit $cpu_rc"
if [[ $waiting_rc -ne 0 ]]; then exit "$waiting_rc"; fi
exit "$cpu_rc"
