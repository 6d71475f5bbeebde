#!/usr/bin/env bash
# Debian's chromium, for tests/report/test_report*.py: the report's HTML is opened in headless
# Chromium and must load without console errors. matplotlib and pandas come from pyproject.toml
# (the virtualenv step of setup.sh). Idempotent and quiet when chromium is there.
set -euo pipefail
if dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q 'install ok installed'; then
  exit 0
fi
echo "setup: installing Debian package chromium (headless check of fioprobe report's HTML)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
