#!/usr/bin/env bash
# Installs what the Ceph scenarios need (`make ceph`): Debian's Ceph 16.2 daemons, its CLI and
# rbd-fuse (this kernel has no rbd or nbd module; an image reaches the probe through rbd-fuse,
# a loop device and ext4). Safe to run twice. The packages' own services are not used (the
# scenarios start every daemon themselves, under one work directory): any the install
# started are stopped again.
set -euo pipefail
PACKAGES=(ceph-mon ceph-mgr ceph-osd ceph-common rbd-fuse e2fsprogs util-linux fuse3)
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "ceph: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for daemon in ceph-mon ceph-mgr ceph-osd ceph-crash; do
    pkill -x "$daemon" 2>/dev/null || true
  done
fi
