#!/usr/bin/env bash
# manifests/lib/catalog.json: the volume types and profiles the configuration accepts, copied
# from the package and jobs/ for the manifests' jsonnet and the chart's schema; and
# lib/volume-types.json, the volume types, for the mixin.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python scripts/catalog.py
