#!/usr/bin/env bash
# actionlint, the GitHub Actions workflow checker, installed as .tools/bin/actionlint for
# `make lint`: the release workflow (.github/workflows/) cannot run here, so its syntax, its
# expressions, the inputs of the actions it uses and the shell of its `run:` steps are checked
# instead. Built as pint is (33-lint-tools.sh): a module of its own in a temporary directory,
# `go get` of the exact version (go.sum checked against the checksum database as usual), the
# version stamped into the binary as its release build does. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
source scripts/go-tool.sh
VERSION=v1.7.12
go_tool actionlint "$VERSION" github.com/rhysd/actionlint/cmd/actionlint \
  "-X github.com/rhysd/actionlint.version=$VERSION"
