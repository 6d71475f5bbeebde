#!/usr/bin/env bash
# actionlint over the GitHub Actions workflows (.github/workflows/, or the directory given):
# their syntax, expressions, the inputs of the actions they use, and the shell of every `run:`
# step through shellcheck. The release workflow cannot run here, so this is how `make lint`
# (and tests/repo/test_lint_workflows.py, on seeded copies) knows it is well formed. shellcheck is
# required: without it actionlint would skip the shell silently.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/.."
dir=${1:-.github/workflows}
actionlint=$PWD/.tools/bin/actionlint
[[ -x $actionlint ]] || { echo "lint-workflows: $actionlint missing: run make setup" >&2; exit 2; }
shellcheck=$(command -v shellcheck) ||
  { echo "lint-workflows: shellcheck missing: run make setup (Debian package shellcheck)" >&2; exit 2; }
shopt -s nullglob
files=("$dir"/*.yml "$dir"/*.yaml)
((${#files[@]})) || { echo "lint-workflows: no workflow in $dir" >&2; exit 2; }
"$actionlint" -no-color -shellcheck "$shellcheck" -pyflakes= "${files[@]}"
