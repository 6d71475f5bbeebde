#!/usr/bin/env bash
# Writes the tables of the manifests' configuration keys (key, type, default, what) into
# docs/MANIFESTS.md, between its "generated: configuration keys" markers, from the schema the
# configuration is checked against (manifests/lib/defaults.libsonnet), so the documentation
# cannot drift from what the rendering accepts. Rendered with go-jsonnet (see 30-manifests.sh).
# Usage: 31-manifests-params.sh [file, default docs/MANIFESTS.md] (tests write a copy).
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
file=${1:-docs/MANIFESTS.md}
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.new"' EXIT
.tools/bin/go-jsonnet -J . -S -e "
  local p = import 'manifests/lib/params.libsonnet';
  local d = import 'manifests/lib/defaults.libsonnet';
  std.join('\n', [
    p.markdown(d),
    '**Volume model** (\`volume\`, fioprobe\'s model of the disk, copied into the probe\'s configuration):',
    '',
    p.markdown(d.parts.volume),
    '**Profile with overrides** (an item of \`profiles\`; fioprobe checks the values against the profile\'s IO budget):',
    '',
    p.markdown(d.parts.profile),
  ])
" >"$tmp"
begin='<!-- generated: configuration keys (scripts/generate.d/31-manifests-params.sh) -->'
end='<!-- end generated: configuration keys -->'
grep -qxF "$begin" "$file" && grep -qxF "$end" "$file" || {
  echo "$file: the lines '$begin' and '$end' are missing" >&2
  exit 1
}
awk -v begin="$begin" -v end="$end" -v table="$tmp" '
  $0 == begin { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }
' "$file" >"$tmp.new"
cat "$tmp.new" >"$file"
