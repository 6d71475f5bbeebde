#!/usr/bin/env bash
# Lints the mixin's rendered rules as monitoring mixins lint theirs (called by `make lint`, and
# by tests/repo/test_lint.py on seeded copies, so the two cannot drift):
# - `promtool check rules` on every rule file (Debian's promtool: the Prometheus the tests run);
# - every set of files that a deployment loads together, merged into one file and checked by
#   promtool, which refuses a group name repeated in one file: loaded together, the files never
#   repeat a group. rules.yaml is loaded with expected.yaml (the shipped manifests) or with
#   expected-per-node.yaml (a per-node deployment) or with expected-provisioning.yaml (the
#   provisioning scenarios' deployment): the expected files are alternatives, each the
#   `fioprobe.expected` group of one deployment, never loaded together;
# - pint (.tools/bin/pint, scripts/setup.d/33-lint-tools.sh) offline over each set, so that
#   its cross-file checks see what Prometheus sees, failing on warnings; its exceptions, each
#   with its reason, are in .pint.hcl.
# Prints each finding and exits 1 if any tool finds one.
# Usage: lint-mixin.sh [rules dir, default alerts/out]
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
dir=${1:-alerts/out}
PINT=.tools/bin/pint
[[ -x $PINT ]] || {
  echo "lint-mixin: $PINT is missing: run scripts/setup.sh" >&2
  exit 1
}
SETS=(
  "rules.yaml expected.yaml"
  "rules.yaml expected-per-node.yaml"
  "rules.yaml expected-provisioning.yaml"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

if ! out=$(promtool check rules "$dir"/*.yaml 2>&1); then
  printf 'promtool check rules:\n%s\n' "$out"
  failed=1
fi

for i in "${!SETS[@]}"; do
  read -ra files <<<"${SETS[i]}"
  paths=("${files[@]/#/$dir/}")
  merged=$tmp/set-$i.yaml
  .venv/bin/python - "$merged" "${paths[@]}" <<'EOF'
import sys

import yaml

merged, *paths = sys.argv[1:]
groups = [g for path in paths for g in (yaml.safe_load(open(path)) or {}).get("groups", [])]
with open(merged, "w") as out:
    yaml.safe_dump({"groups": groups}, out, sort_keys=False)
EOF
  if ! out=$(promtool check rules "$merged" 2>&1); then
    printf 'loaded together, %s:\n%s\n' "${files[*]}" "$out"
    failed=1
  fi
  if ! out=$("$PINT" --no-color --offline --config .pint.hcl lint --fail-on warning \
    "${paths[@]}" 2>&1); then
    printf 'pint lint %s:\n%s\n' "${paths[*]}" "$out"
    failed=1
  fi
done
exit "$failed"
