#!/usr/bin/env bash
# Builds kube-apiserver and kubectl (k8s.io/kubernetes, version pinned in
# scripts/kube-tools/kubernetes/go.mod) and generates the prometheus-operator CRDs
# (ServiceMonitor, PodMonitor, PrometheusRule, and Prometheus, whose selectors the chart's notes
# read) with controller-gen from the prometheus-operator
# Go API module (scripts/kube-tools/controller-gen/go.mod). tests/deploy/test_manifests_apiserver.py
# runs them against Debian's etcd to validate every generated manifest server-side.
#
# Cached under ~/.cache/fioprobe/kube-tools-<version>-<hash of the wrapper modules and this
# script>/, so a second run (and a second checkout) is instant and quiet; .tools/kube points at
# the cache entry in use. Cold: about 15 minutes of compiling on 2 cores (go build caches
# packages in ~/.cache/go-build too). Only the Go module proxy is used.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
ROOT=$PWD
KT=scripts/kube-tools
kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$KT/kubernetes/go.mod")
# Its own two wrapper modules only: helm's (34-helm.sh) is built and cached apart.
hash=$(cat "$KT"/kubernetes/go.{mod,sum} "$KT"/controller-gen/go.{mod,sum} \
  "$KT"/kubernetes/tools.go "$KT"/controller-gen/tools.go "$SELF" |
  sha256sum | cut -c1-12)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/fioprobe/kube-tools-$kube_version-$hash
LINK=$ROOT/.tools/kube

if [[ -f $CACHE/.complete ]]; then
  if [[ $(readlink "$LINK" 2>/dev/null) != "$CACHE" ]]; then
    mkdir -p "$ROOT/.tools"
    ln -sfn "$CACHE" "$LINK"
  fi
  exit 0
fi

echo "setup: building kube-apiserver and kubectl $kube_version and the prometheus-operator CRDs (cold: ~15 min)"
tmp=$CACHE.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/crds"
trap 'rm -rf "$tmp"' EXIT

# The version reported by --version (otherwise v0.0.0-master): kubectl warns about skew
# against a server it cannot place.
minor=$(cut -d. -f2 <<<"$kube_version")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
(
  cd "$KT/kubernetes"
  go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
)
(
  cd "$KT/controller-gen"
  go build -trimpath -o "$tmp/bin/" sigs.k8s.io/controller-tools/cmd/controller-gen
  # allowDangerousTypes: the API has float fields (as upstream's own CRD generation allows).
  "$tmp/bin/controller-gen" crd:crdVersions=v1,allowDangerousTypes=true \
    paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
    output:crd:dir="$tmp/crds.all" >/dev/null
)
for kind in servicemonitors podmonitors prometheusrules prometheuses; do
  cp "$tmp/crds.all/monitoring.coreos.com_$kind.yaml" "$tmp/crds/"
done
rm -rf "$tmp/crds.all"
"$tmp/bin/kube-apiserver" --version >/dev/null
touch "$tmp/.complete"
rm -rf "$CACHE"
mv "$tmp" "$CACHE"
trap - EXIT
mkdir -p "$ROOT/.tools"
ln -sfn "$CACHE" "$LINK"
