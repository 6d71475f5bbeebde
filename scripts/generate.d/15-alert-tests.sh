#!/usr/bin/env bash
# Writes the promtool unit tests alerts/tests/*.yaml: the pushed probes' from the scenarios in
# alerts/tests/scenarios.py (5-minute probe schedule, 30 s scrapes), the continuous stream's
# from the simulated streams of alerts/tests/continuous.py (15 s scrapes). Deterministic.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python alerts/tests/scenarios.py "${1:-alerts/tests}"
.venv/bin/python alerts/tests/continuous.py "${1:-alerts/tests}"
