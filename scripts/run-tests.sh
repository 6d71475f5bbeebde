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
#   the waiting lane leaves idle and yields most of it whenever a waiting test needs it, so
#   the deadlines there see about the load two workers make. (Three workers at one priority
#   overloaded the timed tests on a 2-core machine: docs/BENCHMARKS.md.)
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
# For the tests of this script (tests/repo/test_run_tests.py), space-separated: the CPU lane's
# files instead of the list above, and what the waiting lane collects instead of pyproject's
# testpaths.
if [[ -n ${FIOPROBE_TEST_CPU_LANE:-} ]]; then read -r -a CPU_LANE <<<"$FIOPROBE_TEST_CPU_LANE"; fi
read -r -a WAITING_PATHS <<<"${FIOPROBE_TEST_PATHS:-}"

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
lanes=()
# Stops the lanes as Ctrl-C stops pytest (SIGINT: its fixtures tear down what they started),
# then, for whatever is still running a minute later, SIGTERM and SIGKILL.
# shellcheck disable=SC2317 # called by the traps below
stop_lanes() {
  local signal pgid alive
  for signal in INT TERM KILL; do
    alive=0
    for pgid in "${lanes[@]}"; do
      kill "-$signal" -- "-$pgid" 2>/dev/null && alive=1
    done
    ((alive)) || break
    for _ in $(seq 60); do
      alive=0
      for pgid in "${lanes[@]}"; do kill -0 -- "-$pgid" 2>/dev/null && alive=1; done
      ((alive)) || break
      sleep 1
    done
  done
  rm -f "$log"
}
trap 'stop_lanes; exit 130' INT
trap 'stop_lanes; exit 143' TERM
trap 'stop_lanes; exit 129' HUP
# Job control: each lane is a process group of its own (stopped as a whole), in this script's
# session. Not a session of its own (setsid): with the kernel's autogroup scheduling, nice
# ranks processes only within one session, and the CPU lane's nice 10 would count for nothing.
set -m
# A lane: pytest_run in a process group of its own (`set -m`), at nice $2; its pid is $!.
lane() {
  local name=$1 niceness=$2
  shift 2
  nice -n "$niceness" bash -c "$(declare -f pytest_run); pytest_run \"\$@\"" "$name" \
    -n "$WORKERS" --dist loadfile "$@" </dev/null &
}
lane cpu-lane 10 -p no:cacheprovider "${CPU_LANE[@]}" >"$log" 2>&1
cpu_pid=$!
lane waiting-lane 0 "${ignores[@]}" "${WAITING_PATHS[@]}"
waiting_pid=$!
lanes=("$cpu_pid" "$waiting_pid")
echo "run-tests: the waiting lane; the CPU lane (${#CPU_LANE[@]} files at nice 10) prints when it ends"
# The script only waits: a signal interrupts `wait`, where a command in the foreground would
# defer it.
wait "$waiting_pid"
waiting_rc=$?
wait "$cpu_pid"
cpu_rc=$?
trap - INT TERM HUP
echo
echo "run-tests: the CPU lane (${CPU_LANE[*]})"
cat "$log"
rm -f "$log"
echo "run-tests: waiting lane exit $waiting_rc, CPU lane exit $cpu_rc"
if [[ $waiting_rc -ne 0 ]]; then exit "$waiting_rc"; fi
exit "$cpu_rc"
