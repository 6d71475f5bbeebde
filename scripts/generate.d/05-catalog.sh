#!/usr/bin/env bash
# manifests/lib/catalog.json: the volume types and profiles the configuration accepts, copied
# from the package and jobs/ for the manifests' jsonnet and the chart's schema.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python scripts/catalog.py
