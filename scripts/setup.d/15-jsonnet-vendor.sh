#!/usr/bin/env bash
# jsonnet-bundler (jb) in .tools/bin, and the mixin's jsonnet dependencies (grafonnet
# gen/grafonnet-v11.4.0 and what it imports) in vendor/ (git-ignored), exactly as
# jsonnetfile.lock.json pins them. The dashboards import grafonnet from there (`-J vendor`).
#
# Where the packages come from, first that works:
#   1. vendor/ already matches the lock: jb compares each package's checksum with the lock
#      and fetches nothing. Checked with every network path closed, so a second run is quiet,
#      fast, and never waits on a network.
#   2. GitHub, when `git ls-remote` reaches it within a few seconds.
#   3. The offline git mirrors in ../shared/git-mirror (beside the repository root, else
#      /work/shared/git-mirror; see its README.md), through git's insteadOf for the jb
#      command only (GIT_CONFIG_COUNT/KEY/VALUE in its environment, no git configuration
#      file touched). The lock names the upstream
#      commits either way, so it is the same lock a machine with network access writes.
# FIOPROBE_GIT_MIRROR=<dir> names another mirror directory (same layout).
#
# jb v0.6.0 cannot be had with `go install ...@v0.6.0` (the module proxy refuses its version
# list); it is built from a wrapper module, scripts/jsonnet-bundler/go.mod, the way
# scripts/setup.d/30-kube-apiserver.sh builds the kube tools. Idempotent and quiet when done.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
ROOT=$PWD
MOD=scripts/jsonnet-bundler
JB=$ROOT/.tools/bin/jb

# --- jb ---------------------------------------------------------------------------------
version=$(awk '$1 == "require" && $2 == "github.com/jsonnet-bundler/jsonnet-bundler" {print $3}' "$MOD/go.mod")
want="$version $(cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/tools.go" | sha256sum | cut -c1-12)"
stamp=$ROOT/.tools/bin/.jb.version
if [[ ! -x $JB || $(cat "$stamp" 2>/dev/null) != "$want" ]]; then
  echo "setup: building jsonnet-bundler (jb) $version"
  tmp=$(mktemp -d)
  (
    cd "$MOD"
    # main.Version: what `jb --version` prints (otherwise "dev").
    go build -trimpath -ldflags "-X main.Version=$version" -o "$tmp/jb" \
      github.com/jsonnet-bundler/jsonnet-bundler/cmd/jb
  )
  mkdir -p "$(dirname "$JB")"
  mv "$tmp/jb" "$JB"
  rm -rf "$tmp"
  echo "$want" >"$stamp"
fi

# --- vendor/ ----------------------------------------------------------------------------
log=$(mktemp)
# The lock is the pin: an install must install exactly it, never move it (checked at the end).
lock_before=$(sha256sum jsonnetfile.lock.json | cut -d' ' -f1)
lock_kept() {
  [[ $(sha256sum jsonnetfile.lock.json | cut -d' ' -f1) == "$lock_before" ]] ||
    fail "jb install changed jsonnetfile.lock.json: the mirror or GitHub does not have the pinned commits (git diff jsonnetfile.lock.json)"
}
shim=$ROOT/.tools/git-mirror
trap 'rm -f "$log"' EXIT

# jb with a fixed git URL rewrite and GitHub's archive downloads turned away at once: jb
# tries https://github.com/<repo>/archive/<commit>.tar.gz with Go's HTTP client first, which
# has no timeout; pointing its proxy at a closed local port makes that fail immediately, and
# jb then uses git, which the rewrite sends to `base`.
jb_via() { # jb_via <base URL for https://github.com/> jb-args...
  local base=$1
  shift
  env HTTPS_PROXY=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= \
    GIT_TERMINAL_PROMPT=0 GIT_CONFIG_COUNT=1 \
    GIT_CONFIG_KEY_0="url.$base.insteadOf" GIT_CONFIG_VALUE_0="https://github.com/" \
    timeout 300 "$JB" "$@"
}

# 1. Already installed: nothing may be fetched (the rewrite points nowhere).
if [[ -d vendor ]] && jb_via "file:///nonexistent/" install >"$log" 2>&1; then
  exit 0
fi

fail() {
  echo "setup: cannot install the mixin's jsonnet dependencies (jsonnetfile.json) into vendor/: $*" >&2
  exit 1
}

# 2. GitHub.
if GIT_TERMINAL_PROMPT=0 timeout 10 git ls-remote https://github.com/grafana/grafonnet.git HEAD >/dev/null 2>&1; then
  echo "setup: installing jsonnet dependencies (grafonnet) from GitHub into vendor/"
  if ! timeout 300 "$JB" install >"$log" 2>&1; then
    cat "$log" >&2
    fail "jb install from GitHub failed (output above)"
  fi
  lock_kept
  exit 0
fi

# 3. The offline mirror.
# Beside the repository; failing that, where this workplace keeps it for every checkout
# (a clone made elsewhere, such as a CI run's).
mirror=${FIOPROBE_GIT_MIRROR:-$ROOT/../shared/git-mirror}
if [[ -z ${FIOPROBE_GIT_MIRROR:-} && ! -d $mirror/github.com && -d /work/shared/git-mirror/github.com ]]; then
  mirror=/work/shared/git-mirror
fi
repos=()
if [[ -d $mirror/github.com ]]; then
  mirror=$(realpath "$mirror")
  mapfile -t repos < <(cd "$mirror" && find github.com -mindepth 2 -maxdepth 2 -name '*.git' -type d | sort)
fi
if ((${#repos[@]} == 0)); then
  fail "github.com is not reachable (git ls-remote, 10 s) and there is no git mirror at $mirror (github.com/<owner>/<repo>.git; see its README.md, or set FIOPROBE_GIT_MIRROR)"
fi
# A mirror copied without its empty refs/ directory is no repository to git (HEAD, objects/
# and packed-refs are all there). Then each one is read through a small repository of our
# own under .tools/ that borrows the mirror's objects (objects/info/alternates) and copies
# its HEAD and packed-refs: nothing is copied but a few hundred bytes, and the mirror, which
# may be read-only, is not written to.
base=$mirror
for repo in "${repos[@]}"; do
  if ! git --git-dir="$mirror/$repo" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    base=$shim
    break
  fi
done
if [[ $base == "$shim" ]]; then
  rm -rf "$shim"
  for repo in "${repos[@]}"; do
    src=$mirror/$repo
    [[ -d $src/objects && -f $src/HEAD ]] || fail "$src is not a git repository (no objects/ or HEAD)"
    git init -q --bare "$shim/$repo"
    echo "$src/objects" >"$shim/$repo/objects/info/alternates"
    cp "$src/HEAD" "$shim/$repo/HEAD"
    if [[ -f $src/packed-refs ]]; then cp "$src/packed-refs" "$shim/$repo/packed-refs"; fi
    git --git-dir="$shim/$repo" rev-parse --verify -q HEAD >/dev/null ||
      fail "$src: git cannot read its HEAD commit even through $shim/$repo"
  done
fi
echo "setup: installing jsonnet dependencies (grafonnet) from the git mirror $mirror into vendor/"
if ! jb_via "file://$base/github.com/" install >"$log" 2>&1; then
  cat "$log" >&2
  fail "jb install from the git mirror $mirror failed (output above)"
fi
lock_kept
