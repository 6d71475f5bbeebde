#!/usr/bin/env bash
# README's metric table, from exporter/fioprobe/metrics.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python scripts/readme_metrics.py
