#!/usr/bin/env bash
# kube-prometheus v0.18.0 and its jsonnet dependencies in tests/data/kube-prometheus/vendor/
# (git-ignored), exactly as tests/data/kube-prometheus/jsonnetfile.lock.json pins them, for
# tests/deploy/test_kube_prometheus.py: it renders manifests/kube-prometheus/example.jsonnet with them.
# Needs jb from 15-jsonnet-vendor.sh. Idempotent and quiet when done.
#
# Where the packages come from, first that works (as in 15-jsonnet-vendor.sh):
#   1. vendor/ already matches the lock: jb compares each package's checksum with the lock and
#      fetches nothing (every network path closed, so a second run never waits on one).
#   2. GitHub, when `git ls-remote` reaches it within a few seconds.
#   3. The offline git mirrors in ../shared/git-mirror (beside the repository root, else
#      /work/shared/git-mirror; FIOPROBE_GIT_MIRROR=<dir> names another), through git's
#      insteadOf for the jb command only. Most of them are partial (files outside the
#      directories jb installs are left out), so git fetches without file contents and gets
#      those it checks out on demand (blob:none), as the mirror's README.md explains.
#
# github.com/grafana/grafana (grafana-mixin, imported by kube-prometheus's Grafana component
# for its own rules and overview dashboard) has no mirror: a stand-in with no rules and no
# dashboards is written to vendor/ first, and the lock names its checksum, so jb keeps it and
# never fetches that package, online or not. Nothing the test checks comes from it.
# The lock names commits, not the annotated tag objects kube-prometheus's own lock names for
# some packages: jb's git path records commits, and the files are the same either way.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
ROOT=$PWD
DIR=$ROOT/tests/data/kube-prometheus
JB=$ROOT/.tools/bin/jb
STANDIN=$DIR/vendor/github.com/grafana/grafana/grafana-mixin/mixin.libsonnet

fail() {
  echo "setup: cannot install kube-prometheus ($DIR/jsonnetfile.json) into $DIR/vendor/: $*" >&2
  exit 1
}
[[ -x $JB ]] || fail "$JB is missing (scripts/setup.d/15-jsonnet-vendor.sh builds it)"
cd "$DIR"

# --- the grafana-mixin stand-in ----------------------------------------------------------
standin='// Stand-in for github.com/grafana/grafana/grafana-mixin, which has no offline mirror:
// no alerts, recording rules or dashboards. Written by scripts/setup.d/16-kube-prometheus.sh.
{ prometheusAlerts+:: { groups+: [] }, prometheusRules+:: { groups+: [] }, grafanaDashboards+:: {} }'
if [[ ! -f $STANDIN || $(cat "$STANDIN") != "$standin" ]]; then
  mkdir -p "$(dirname "$STANDIN")"
  printf '%s\n' "$standin" >"$STANDIN"
fi

# --- vendor/ ----------------------------------------------------------------------------
log=$(mktemp)
trap 'rm -f "$log"' EXIT
lock_before=$(sha256sum jsonnetfile.lock.json | cut -d' ' -f1)
lock_kept() {
  [[ $(sha256sum jsonnetfile.lock.json | cut -d' ' -f1) == "$lock_before" ]] ||
    fail "jb install changed jsonnetfile.lock.json: the mirror or GitHub does not have the pinned commits (git diff $DIR/jsonnetfile.lock.json)"
}
# jb with a fixed git URL rewrite and GitHub's archive downloads turned away at once (its HTTP
# client has no timeout; a proxy on a closed local port fails it immediately and jb uses git).
# The last two settings make git fetch without file contents, which the partial mirrors need.
jb_via() { # jb_via <base URL for https://github.com/> jb-args...
  local base=$1
  shift
  env HTTPS_PROXY=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
    GIT_TERMINAL_PROMPT=0 GIT_CONFIG_COUNT=3 \
    GIT_CONFIG_KEY_0="url.$base.insteadOf" GIT_CONFIG_VALUE_0="https://github.com/" \
    GIT_CONFIG_KEY_1=remote.origin.promisor GIT_CONFIG_VALUE_1=true \
    GIT_CONFIG_KEY_2=remote.origin.partialCloneFilter GIT_CONFIG_VALUE_2=blob:none \
    timeout 300 "$JB" "$@"
}

# 1. Already installed: nothing may be fetched (the rewrite points nowhere).
if [[ -d vendor/github.com/prometheus-operator/kube-prometheus ]] &&
  jb_via "file:///nonexistent/" install >"$log" 2>&1; then
  lock_kept
  exit 0
fi

# 2. GitHub.
if GIT_TERMINAL_PROMPT=0 timeout 10 git ls-remote https://github.com/prometheus-operator/kube-prometheus.git HEAD >/dev/null 2>&1; then
  echo "setup: installing kube-prometheus v0.18.0 (jsonnet) from GitHub into $DIR/vendor/"
  if ! timeout 300 "$JB" install >"$log" 2>&1; then
    cat "$log" >&2
    fail "jb install from GitHub failed (output above)"
  fi
  lock_kept
  exit 0
fi

# 3. The offline mirror.
mirror=${FIOPROBE_GIT_MIRROR:-$ROOT/../shared/git-mirror}
if [[ -z ${FIOPROBE_GIT_MIRROR:-} && ! -d $mirror/github.com && -d /work/shared/git-mirror/github.com ]]; then
  mirror=/work/shared/git-mirror
fi
[[ -d $mirror/github.com/prometheus-operator/kube-prometheus.git ]] ||
  fail "github.com is not reachable (git ls-remote, 10 s) and $mirror has no github.com/prometheus-operator/kube-prometheus.git (see the mirror's README.md, or set FIOPROBE_GIT_MIRROR)"
mirror=$(realpath "$mirror")
echo "setup: installing kube-prometheus v0.18.0 (jsonnet) from the git mirror $mirror into $DIR/vendor/"
if ! jb_via "file://$mirror/github.com/" install >"$log" 2>&1; then
  cat "$log" >&2
  fail "jb install from the git mirror $mirror failed (output above; a mirror copied without its refs/ directory is no repository to git)"
fi
lock_kept
