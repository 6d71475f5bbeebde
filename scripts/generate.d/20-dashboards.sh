#!/usr/bin/env bash
# Renders the Grafana dashboards of the mixin into dashboards/out/*.json (committed; CI checks
# that regenerating changes nothing). Deterministic: jsonnet's object fields are sorted.
# Rendered with go-jsonnet, as every generated file is (see 10-mixin.sh).
# FIOPROBE_DASHBOARDS_OUT=<dir> renders into another directory (the tests compare it with
# dashboards/out). Files in the output directory that no dashboard produces are removed.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
out=${FIOPROBE_DASHBOARDS_OUT:-dashboards/out}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.tools/bin/go-jsonnet -J . -J vendor -S -m "$tmp" dashboards/render.jsonnet >/dev/null
mkdir -p "$out"
rm -f "$out"/*.json
cp "$tmp"/*.json "$out"/
