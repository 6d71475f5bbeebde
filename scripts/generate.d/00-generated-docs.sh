#!/usr/bin/env bash
# The docs' copies of Python tables (metrics, volume types, failure reasons), between markers.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python scripts/generated_docs.py
