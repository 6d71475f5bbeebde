#!/usr/bin/env bash
# Regenerates every committed generated file. CI checks that running it changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/.tools/bin:$PWD/.venv/bin:$PATH
for gen in scripts/generate.d/*.sh; do
  [[ -e $gen ]] || continue
  bash "$gen"
done
