#!/usr/bin/env bash
# grafana/dashboard-linter --strict over every rendered dashboard: dashboards/out/ and the
# chart's copies per probe interval (or the files given), with the exclusions and their reasons
# of dashboards/.lint. `make lint` runs it; tests/repo/test_lint_dashboards.py seeds one mistake per
# rule that is not excluded and checks that it fails.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
linter=$PWD/.tools/bin/dashboard-linter
[[ -x $linter ]] || { echo "lint-dashboards: $linter missing: run make setup" >&2; exit 2; }
config=${DASHBOARD_LINT_CONFIG:-$PWD/dashboards/.lint}
if (($#)); then
  files=("$@")
else
  files=(dashboards/out/*.json charts/fioprobe/files/dashboards/*/*.json)
fi
failed=0
for file in "${files[@]}"; do
  if ! out=$("$linter" lint --strict -c "$config" "$file" 2>&1); then
    printf '%s:\n%s\n' "$file" "$(grep -v '^Checks that\|there were linting errors' <<<"$out")" >&2
    failed=1
  fi
done
exit $failed
