#!/usr/bin/env bash
# actionlint, the GitHub Actions workflow checker, installed as .tools/bin/actionlint for
# `make lint`: the release workflow (.github/workflows/) cannot run here, so its syntax, its
# expressions, the inputs of the actions it uses and the shell of its `run:` steps are checked
# instead. Built as pint is (33-lint-tools.sh): a module of its own in a temporary directory,
# `go get` of the exact version (go.sum checked against the checksum database as usual), the
# version stamped into the binary as its release build does. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")/../.."
VERSION=v1.7.12
BIN=$PWD/.tools/bin/actionlint
STAMP=$PWD/.tools/bin/.actionlint.version
if [[ -x $BIN && $(cat "$STAMP" 2>/dev/null) == "$VERSION" ]]; then
  exit 0
fi
echo "setup: building actionlint $VERSION"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(
  cd "$tmp"
  go mod init fioprobe.local/actionlint
  go get "github.com/rhysd/actionlint/cmd/actionlint@$VERSION"
  go build -trimpath -ldflags "-X github.com/rhysd/actionlint.version=$VERSION" \
    -o "$tmp/actionlint" github.com/rhysd/actionlint/cmd/actionlint
) >"$tmp/log" 2>&1 || {
  cat "$tmp/log" >&2
  exit 1
}
mkdir -p "$(dirname "$BIN")"
mv "$tmp/actionlint" "$BIN"
echo "$VERSION" >"$STAMP"
