#!/usr/bin/env bash
# Generates JSON schemas for Grafana dashboards from the npm package @grafana/schema, so that
# tests/mixin/test_dashboards.py can validate the rendered dashboards without a Grafana server
# (none can be installed here). Everything lands in .tools/grafana-schema/ (gitignored).
#
# Schemas written (one per TypeScript type, draft-07, by ts-json-schema-generator):
#   dashboard.json               raw/dashboard/x Dashboard: the classic (v1) dashboard JSON model,
#                                the format Grafana's provisioning and the dashboard sidecar load.
#                                (The v0alpha1/v1beta1 "Spec" types are `{[key: string]: any}`
#                                and would check nothing.)
#   panel-<type>.options.json    each used panel plugin's Options (panel "options")
#   panel-<type>.fieldconfig.json  its FieldConfig (fieldConfig.defaults.custom), where it has one
#
# Idempotent and quiet: a stamp file records the pinned versions; nothing runs when it matches.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/../.."
DIR=$PWD/.tools/grafana-schema
STAMP=$DIR/.stamp
PANEL_TYPES=(timeseries heatmap bargauge table stat)
# dashboards/schema/package-lock.json pins every transitive package (typescript, ...) too.
LOCK=dashboards/schema/package-lock.json
want="$(sha256sum dashboards/schema/package.json "$LOCK" "$SELF" | cut -d' ' -f1 | tr '\n' ' ')${PANEL_TYPES[*]}"
if [[ -f $STAMP && $(cat "$STAMP") == "$want" && -f $DIR/dashboard.json ]]; then
  exit 0
fi
echo "setup: generating Grafana dashboard JSON schemas (dashboards/schema/package.json pins @grafana/schema)"
if ! command -v npm >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
rm -rf "$DIR"
mkdir -p "$DIR"
cd "$DIR"
cp ../../dashboards/schema/package.json ../../dashboards/schema/package-lock.json .
# npm ci installs exactly the lockfile; --ignore-scripts: no package here needs install scripts.
npm ci --silent --no-audit --no-fund --ignore-scripts >/dev/null
TYPES=node_modules/@grafana/schema/dist/types
gen() { # gen <file.d.ts> <type> <out.json>
  node_modules/.bin/ts-json-schema-generator \
    --path "$1" --type "$2" --no-type-check --out "$3" >/dev/null
}
gen "$TYPES/raw/dashboard/x/types.gen.d.ts" Dashboard dashboard.json
for p in "${PANEL_TYPES[@]}"; do
  src=$TYPES/raw/composable/$p/panelcfg/x/types.gen.d.ts
  gen "$src" Options "panel-$p.options.json"
  if grep -q '^export interface FieldConfig ' "$src"; then
    gen "$src" FieldConfig "panel-$p.fieldconfig.json"
  fi
done
echo "$want" >"$STAMP"
