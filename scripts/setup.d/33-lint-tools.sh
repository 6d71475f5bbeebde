#!/usr/bin/env bash
# pint, Cloudflare's Prometheus rule linter, installed as .tools/bin/pint for
# scripts/lint-mixin.sh (`make lint`), which runs it offline over the rendered rules as
# mixins lint theirs. Built from a module of its own in a temporary directory: the module
# proxy serves pint's exact versions but not its version list, which `go install pkg@version`
# reads and `go get` of an exact version does not; go.sum is checked against the checksum
# database as usual. The version is stamped into the binary (`pint version`) as its own
# release build does. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
source scripts/go-tool.sh
VERSION=v0.87.0
COMMIT=fcd0a6d9ef75445eae92e1f31915469908d7cde7 # the tag's commit, for `pint version`
go_tool pint "$VERSION" github.com/cloudflare/pint/cmd/pint \
  "-X main.version=$VERSION -X main.commit=$COMMIT"
