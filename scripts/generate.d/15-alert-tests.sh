#!/usr/bin/env bash
# Writes the promtool unit tests alerts/tests/*.yaml from the scenarios in
# alerts/tests/scenarios.py (5-minute probe schedule, 30 s scrapes). Deterministic.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python alerts/tests/scenarios.py "${1:-alerts/tests}"
