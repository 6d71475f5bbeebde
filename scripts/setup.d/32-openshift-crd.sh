#!/usr/bin/env bash
# The SecurityContextConstraints CRD of OpenShift's API module (github.com/openshift/api at a
# pinned commit), for tests/deploy/test_manifests_openshift.py: the SCC that the OpenShift platform
# option renders is applied under it to the test suite's kube-apiserver. From the Go module
# proxy (`go mod download`, about 5 MB, cached in GOMODCACHE); the checksum database does not
# list this pseudo-version, so it is skipped for this one module (GONOSUMDB) and the module's
# hash pinned here verifies it instead. Installed as .tools/kube-openshift/scc.crd.yaml.
# Idempotent and quiet when done.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
MODULE=github.com/openshift/api
VERSION=v0.0.0-20251021124544-a2cb0c5d994d
SUM=h1:qV7SZW35RjLL0Hq8yW1Cbsa4F4zb6Fc+jFfUAKvHIbE=
CRD=payload-manifests/crds/0000_03_config-operator_01_securitycontextconstraints.crd.yaml
DEST=$PWD/.tools/kube-openshift/scc.crd.yaml
STAMP=$DEST.version
if [[ -f $DEST && $(cat "$STAMP" 2>/dev/null) == "$VERSION $SUM" ]]; then
  exit 0
fi
echo "setup: downloading the SecurityContextConstraints CRD ($MODULE@$VERSION)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
info=$(cd "$tmp" && GONOSUMDB=$MODULE GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION")
sum=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("Sum", ""))' <<<"$info")
dir=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("Dir", ""))' <<<"$info")
if [[ $sum != "$SUM" || ! -f $dir/$CRD ]]; then
  echo "setup: $MODULE@$VERSION: hash $sum, expected $SUM (or no $CRD in it)" >&2
  exit 1
fi
mkdir -p "$(dirname "$DEST")"
install -m 0644 "$dir/$CRD" "$DEST.tmp"
mv "$DEST.tmp" "$DEST"
echo "$VERSION $SUM" >"$STAMP"
