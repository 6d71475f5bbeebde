#!/usr/bin/env bash
# Renders the Kubernetes manifests from manifests/*.libsonnet (user settings in
# manifests/config.libsonnet) into manifests/generated/*.yaml and manifests/kustomization.yaml
# (committed; CI checks that regenerating changes nothing). Deterministic: jsonnet sorts object
# keys. Files in manifests/generated/ that no object produces any more are removed. Rendered
# with go-jsonnet, as every generated file is (see 10-mixin.sh); C++ jsonnet would also take
# over a minute here.
# Usage: 30-manifests.sh [output dir, default manifests] (tests render into a temporary
# directory); extra jsonnet options after it, e.g. --tla-code overrides='{...}'.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
out=${1:-manifests}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/generated"
# A configuration error (manifests/lib/params.libsonnet) is reported as its message lines only:
# jsonnet's stack trace would point into the checking code, not at the user's key.
# -J vendor: the dashboards' grafonnet, installed by jsonnet-bundler (jsonnetfile.json).
if ! .tools/bin/go-jsonnet -J . -J vendor -S -m "$tmp" "$@" manifests/render.jsonnet >/dev/null 2>"$tmp/stderr"; then
  if head -1 "$tmp/stderr" | grep -q '^RUNTIME ERROR: fioprobe manifests config: '; then
    sed -n '/^\t/q; p' "$tmp/stderr" >&2
  else
    cat "$tmp/stderr" >&2
  fi
  exit 1
fi
mkdir -p "$out/generated"
rm -f "$out"/generated/*.yaml
cp "$tmp"/generated/*.yaml "$out/generated/"
cp "$tmp/kustomization.yaml" "$out/kustomization.yaml"
