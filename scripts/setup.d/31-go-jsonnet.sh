#!/usr/bin/env bash
# go-jsonnet's `jsonnet`, installed as .tools/bin/go-jsonnet, for rendering the Kubernetes
# manifests (scripts/generate.d/30-manifests.sh). Debian's C++ jsonnet 0.18 takes over a
# minute of CPU for them (its std.manifestYamlDoc/manifestJsonEx walk the dashboards' large
# strings in jsonnet code); go-jsonnet has them built in and takes half a second. A separate
# name, so that the other generators keep using `jsonnet` as they are. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
VERSION=v0.21.0
BIN=$PWD/.tools/bin/go-jsonnet
STAMP=$PWD/.tools/bin/.go-jsonnet.version
if [[ -x $BIN && $(cat "$STAMP" 2>/dev/null) == "$VERSION" ]]; then
  exit 0
fi
echo "setup: building go-jsonnet $VERSION"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN=$tmp go install "github.com/google/go-jsonnet/cmd/jsonnet@$VERSION"
mkdir -p "$(dirname "$BIN")"
mv "$tmp/jsonnet" "$BIN"
echo "$VERSION" >"$STAMP"
