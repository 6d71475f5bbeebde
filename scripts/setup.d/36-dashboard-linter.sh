#!/usr/bin/env bash
# grafana/dashboard-linter, installed as .tools/bin/dashboard-linter for scripts/lint-dashboards.sh
# (`make lint`), which runs it with --strict over every rendered dashboard, as the monitoring
# mixins lint theirs. Its tagged versions are refused by the module proxy (their go.mod names a
# module path they were not published under); the pseudo-version below builds. It requires
# github.com/zeitlinger/conflate at a version the checksum database does not list, hence
# GONOSUMDB for exactly that module: its content is then trusted as the module proxy serves it
# (every other module is checked against the checksum database as usual).
# Built as pint is (33-lint-tools.sh): a module of its own in a temporary directory. Idempotent
# and quiet; cold, the build is minutes of CPU (docs/BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
source scripts/go-tool.sh
export GONOSUMDB=github.com/zeitlinger/conflate
go_tool dashboard-linter v0.0.0-20241216132922-9479ff4bfa35 github.com/grafana/dashboard-linter
