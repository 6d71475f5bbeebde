#!/usr/bin/env bash
# go-jsonnet's `jsonnet`, installed as .tools/bin/go-jsonnet: the one interpreter of every
# generated file (scripts/generate.d: the mixin's rules, the dashboards, the manifests), as
# mixtool and kube-prometheus use it. Debian's C++ jsonnet 0.18 takes over a minute of CPU for
# the manifests (its std.manifestYamlDoc/manifestJsonEx walk the dashboards' large strings in
# jsonnet code) where go-jsonnet takes half a second, and prints 0.005 as
# 0.0050000000000000001. A separate name, so that Debian's `jsonnet` stays what the demo uses
# (`make demo` does not build this). Idempotent and quiet.
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
