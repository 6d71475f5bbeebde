#!/usr/bin/env bash
# Installs every tool fioprobe's demo, tests and benchmarks need, on a fresh Debian 12 machine.
# Idempotent and quiet when everything is already there: each step checks before it acts.
# Called by `make setup` (and so by `make test`); `make demo` calls it with --core, which
# skips the extras only the tests use (scripts/setup.d: kube-apiserver, Grafana schemas,
# Chromium, jb and grafonnet for rendering the dashboards; the demo reads the committed
# dashboards/out/). Safe to run twice.
set -euo pipefail
CORE_ONLY=false
[[ ${1:-} == --core ]] && CORE_ONLY=true
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf 'setup: %s\n' "$*"; }

# --- Debian packages -------------------------------------------------------------------
# fio: the probe itself; prometheus (+promtool), pushgateway, alertmanager, etcd: the real
# components the tests run; jsonnet (+jsonnetfmt): the demo's rules and formatting (generated
# files are rendered with go-jsonnet, scripts/setup.d/31-go-jsonnet.sh); fuse3: the slow test
# filesystem; util-linux/e2fsprogs: loop devices and small filesystems for fault tests;
# shellcheck: the shell of the release workflow's steps (make lint, through actionlint).
APT_PACKAGES=(
  fio prometheus prometheus-pushgateway prometheus-alertmanager etcd-server etcd-client
  jsonnet fuse3 libfuse2 util-linux e2fsprogs python3-venv ca-certificates openssl shellcheck
)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts services on install where an init system exists; none must keep running
  # here, the tests start their own instances on free ports. Only right after an install:
  # at any other time these names may be a running test suite's own servers.
  for svc in prometheus prometheus-pushgateway prometheus-alertmanager etcd; do
    pkill -x "$svc" 2>/dev/null || true
  done
fi

# --- Python virtualenv ------------------------------------------------------------------
VENV=$ROOT/.venv
stamp=$VENV/.fioprobe-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -x $VENV/bin/python ]]; then
  say "creating virtualenv $VENV"
  python3 -m venv "$VENV"
fi
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  say "installing Python packages (pinned in pyproject.toml)"
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[dev]"
  echo "$want" >"$stamp"
fi

# --- Go tools ---------------------------------------------------------------------------
TOOLS=$ROOT/.tools/bin
mkdir -p "$TOOLS"
JSONNET_LINT_VERSION=v0.21.0
if [[ ! -x $TOOLS/jsonnet-lint || $(cat "$TOOLS/.jsonnet-lint.version" 2>/dev/null) != "$JSONNET_LINT_VERSION" ]]; then
  say "building jsonnet-lint $JSONNET_LINT_VERSION"
  GOBIN=$TOOLS go install "github.com/google/go-jsonnet/cmd/jsonnet-lint@$JSONNET_LINT_VERSION"
  echo "$JSONNET_LINT_VERSION" >"$TOOLS/.jsonnet-lint.version"
fi

# --- Extra steps of later components (dashboards schema, kube-apiserver, ...) -------------
$CORE_ONLY && exit 0
for extra in scripts/setup.d/*.sh; do
  [[ -e $extra ]] || continue
  bash "$extra"
done
