#!/usr/bin/env bash
# Writes the Helm chart's generated files (charts/fioprobe/: Chart.yaml, values.yaml,
# values.schema.json, files/rules/, files/dashboards/, files/derived.json) from the manifests' schema, defaults and
# configuration and from the mixin, as manifests/chart.jsonnet collects them; the chart's
# templates and README are hand-written. Rendered with go-jsonnet, as every generated file is
# (see 10-mixin.sh); scripts/chart_files.py writes the files (docs as YAML comments).
# Usage: 32-chart.sh [chart dir, default charts/fioprobe] (tests write a copy).
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
out=${1:-charts/fioprobe}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
.tools/bin/go-jsonnet -J . -J vendor manifests/chart.jsonnet >"$tmp"
.venv/bin/python scripts/chart_files.py "$out" <"$tmp"
