#!/usr/bin/env bash
# helm, built from its Go module (helm.sh/helm/v3, version pinned in
# scripts/kube-tools/helm/go.mod) for tests/deploy/test_chart.py and `make e2e`, which lint, render and
# install charts/fioprobe/ with it. `go install helm.sh/helm/v3/cmd/helm@version` is refused
# by the module proxy here; a wrapper module with a pinned go.sum builds it, as
# 30-kube-apiserver.sh builds kubectl.
#
# The wrapper raises helm's k8s.io modules to the versions kube-apiserver is built from and
# uses the same build settings (-trimpath, cgo as Go's default), so that the packages both
# compile alike come from one Go build cache. The version stamps are those of helm's own
# Makefile: its version, and the Kubernetes minor of its client-go modules, which `helm
# template` reports as .Capabilities.KubeVersion and `helm lint` checks deprecations against.
#
# Measured from empty Go build and module caches (2026-11-27, 2 cores): 83 s on a quiet
# machine, 334 s beside other builds and test suites. After kube-apiserver's build 207 of helm's
# 674 non-standard packages are already in the build cache: the others sit above modules whose
# versions differ (go.yaml.in/yaml/v2, spf13/pflag, golang.org/x/oauth2), which helm requires
# newer than kube-apiserver v1.36.4 pins.
# Cached under ~/.cache/fioprobe/helm-<version>-<hash of the wrapper module and this script>/;
# .tools/bin/helm points at the cache entry in use, so a second run (and a second checkout)
# is instant and quiet. Only the Go module proxy is used.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
ROOT=$PWD
MOD=scripts/kube-tools/helm
# A module's version from go.mod: `require mod v` or, inside a require block, `mod v`.
required() { awk -v m="$1" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$MOD/go.mod"; }
version=$(required helm.sh/helm/v3)
client_go=$(required k8s.io/client-go)
hash=$(cat "$MOD"/go.mod "$MOD"/go.sum "$MOD"/tools.go "$SELF" | sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe/helm-$version-$hash
LINK=$ROOT/.tools/bin/helm

if [[ -x $CACHE/helm ]]; then
  if [[ $(readlink "$LINK" 2>/dev/null) != "$CACHE/helm" ]]; then
    mkdir -p "$ROOT/.tools/bin"
    ln -sfn "$CACHE/helm" "$LINK"
  fi
  exit 0
fi

echo "setup: building helm $version (cold: 1.5 to 6 min)"
tmp=$CACHE.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# client-go v0.36.4 is Kubernetes 1.36.
minor=$(cut -d. -f2 <<<"$client_go")
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
ldflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
done
(
  cd "$MOD"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/" helm.sh/helm/v3/cmd/helm
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
