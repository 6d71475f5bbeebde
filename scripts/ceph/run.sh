#!/usr/bin/env bash
# `make ceph`: the Ceph scenarios (tests/ceph) on a real single-host cluster built by the tests
# under one work directory, then the check that nothing was left behind: no Ceph or rbd-fuse
# process, mount or loop device of that directory. The check runs here, after the test process
# has exited, so a test that crashed cannot hide what it left. Never run beside another suite:
# on 2 cores a starved OSD is marked down for no real reason. Root only (mounts, loop devices).
set -uo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
REPO=$PWD
say() { printf 'ceph: %s\n' "$*" >&2; }
if [[ $(id -u) != 0 ]]; then
  say "refusing to run: the scenarios need root (loop devices, mounts)"
  exit 2
fi
bash scripts/ceph/setup.sh || exit 1
export PATH=$REPO/.tools/bin:$REPO/.venv/bin:$PATH
# The work directory, and so the OSDs' BlueStore files, in memory (tmpfs, which takes
# BlueStore's O_DIRECT since Linux 6.6; the OSDs hold up to about 3 GiB): on this machine's
# virtual disk every replica's commit would also wait for the host's own fsync, whose jitter
# puts 1 to 2 % of a healthy cluster's fsyncs above 10 ms (docs/CEPH.md, "The cluster").
# FIOPROBE_CEPH_BASE=/tmp puts it on disk instead.
BASE=${FIOPROBE_CEPH_BASE:-/dev/shm}
ROOT=$(mktemp -d "$BASE/fioprobe-ceph.XXXXXX") || exit 1
say "work directory $ROOT"
export FIOPROBE_CEPH_ROOT=$ROOT
started=$SECONDS
"$REPO/.venv/bin/python" -m pytest -p no:cacheprovider -c "$REPO/tests/ceph/pytest.ini" \
  "$REPO/tests/ceph" "$@"
rc=$?
say "tests finished in $((SECONDS - started)) s (exit $rc)"
if ! PYTHONPATH=$REPO/tests "$REPO/.venv/bin/python" -m support.ceph leftovers "$ROOT"; then
  say "the scenarios left the above behind under $ROOT; it stays for inspection"
  exit 1
fi
if [[ $rc != 0 ]]; then
  # The work directory is in memory and goes now; its logs (daemons, stream, Pushgateway,
  # Prometheus) stay for finding out why a scenario failed.
  KEEP=$(mktemp -d /tmp/fioprobe-ceph-logs.XXXXXX) &&
    (cd "$ROOT" && find . -name '*.log' -not -path '*/store.db/*' -print0 |
      xargs -0 -r cp --parents -t "$KEEP") &&
    if rmdir "$KEEP" 2>/dev/null; then
      say "the failed run wrote no logs"
    else
      say "the failed run's logs are in $KEEP"
    fi
fi
rm -rf "$ROOT"
exit $rc
