#!/usr/bin/env bash
# Helm 4, built from its Go module (helm.sh/helm/v4, version pinned in
# scripts/kube-tools/helm4/go.mod) as .tools/bin/helm4, beside Helm 3 (34-helm.sh, .tools/bin/helm):
# the chart is linted, dry-run installed and, in `make e2e`, installed, upgraded from a Helm 3
# release and uninstalled with it. Helm 3 gets security fixes until 2027-02-10; both are
# supported, so both are tested. Built as Helm 3 is (a wrapper module with a pinned go.sum; the
# version stamped as Helm's own Makefile does); its k8s.io modules are newer than
# kube-apiserver's, so it shares fewer packages with that build (docs/BENCHMARKS.md has the cold
# build time). Cached under ~/.cache/fioprobe/helm4-<version>-<hash of the wrapper module and
# this script>/; a second run (and a second checkout) is instant and quiet.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
ROOT=$PWD
MOD=scripts/kube-tools/helm4
required() { awk -v m="$1" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$MOD/go.mod"; }
version=$(required helm.sh/helm/v4)
hash=$(cat "$MOD"/go.mod "$MOD"/go.sum "$MOD"/tools.go "$SELF" | sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe/helm4-$version-$hash
LINK=$ROOT/.tools/bin/helm4

if [[ -x $CACHE/helm ]]; then
  if [[ $(readlink "$LINK" 2>/dev/null) != "$CACHE/helm" ]]; then
    mkdir -p "$ROOT/.tools/bin"
    ln -sfn "$CACHE/helm" "$LINK"
  fi
  exit 0
fi

echo "setup: building helm $version"
tmp=$CACHE.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$version"
ldflags+=" -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
(
  cd "$MOD"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" helm.sh/helm/v4/cmd/helm
) >"$tmp/log" 2>&1 || {
  cat "$tmp/log" >&2
  exit 1
}
rm -f "$tmp/log"
"$tmp/helm" version --short >/dev/null
rm -rf "$CACHE"
mv "$tmp" "$CACHE"
trap - EXIT
mkdir -p "$ROOT/.tools/bin"
ln -sfn "$CACHE/helm" "$LINK"
