#!/usr/bin/env bash
# jsonnetfmt --test and jsonnet-lint over every .jsonnet/.libsonnet file of the repository
# (tracked or new, not git-ignored: vendor/ is jsonnet-bundler's copy of other projects).
# Called by `make lint`. Prints each finding and exits 1 if any file is not jsonnetfmt-formatted
# or has a lint finding (unused locals, unknown variables, bad imports).
# Usage: lint-jsonnet.sh [file...]   (default: every file of the repository)
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
LINT=.tools/bin/jsonnet-lint
[[ -x $LINT ]] || {
  echo "lint-jsonnet: $LINT is missing: run scripts/setup.sh" >&2
  exit 1
}
# Imports kube-prometheus, which only a user's own jb install provides: formatting only.
NO_LINT=(manifests/kube-prometheus/example.jsonnet)

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.jsonnet' '*.libsonnet' | sort)
fi
failed=0
for file in "${files[@]}"; do
  [[ -f $file ]] || continue # deleted in the work tree, not yet in the index
  if ! jsonnetfmt --test "$file"; then
    echo "$file: not jsonnetfmt-formatted (jsonnetfmt -i $file)"
    failed=1
  fi
  [[ " ${NO_LINT[*]} " == *" $file "* ]] && continue
  # One file per run: jsonnet-lint v0.21 panics ("placeholder for a dependent node cannot be
  # noType") on some sets of several files. It reports findings on stdout or stderr.
  if ! out=$("$LINT" -J . -J vendor "$file" 2>&1) || [[ -n $out ]]; then
    printf '%s: jsonnet-lint:\n%s\n' "$file" "$out"
    failed=1
  fi
done
exit "$failed"
