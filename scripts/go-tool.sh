# shellcheck shell=bash
# Sourced by the setup steps that build one Go tool (scripts/setup.d/33-lint-tools.sh,
# 35-actionlint.sh, 36-dashboard-linter.sh):
#   go_tool NAME VERSION PACKAGE [LDFLAGS]
# builds PACKAGE at VERSION into .tools/bin/NAME from a module of its own in a temporary
# directory: the module proxy serves exact versions that `go install pkg@version` refuses (it
# reads the version list), and `go get` of an exact version checks go.sum against the checksum
# database as usual. Idempotent and quiet: a stamp beside the binary holds the version built.
# The caller's environment passes through (a step may set GONOSUMDB for one module).
go_tool() {
  local name=$1 version=$2 package=$3 ldflags=${4:-}
  local bin=$PWD/.tools/bin/$name stamp=$PWD/.tools/bin/.$name.version
  if [[ -x $bin && $(cat "$stamp" 2>/dev/null) == "$version" ]]; then
    return 0
  fi
  echo "setup: building $name $version"
  local tmp
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064 # the directory is this call's, expanded now
  trap "rm -rf '$tmp'" RETURN
  (
    cd "$tmp"
    go mod init "fioprobe.local/$name"
    go get "$package@$version"
    go build -trimpath -ldflags "$ldflags" -o "$tmp/$name" "$package"
  ) >"$tmp/log" 2>&1 || {
    cat "$tmp/log" >&2
    return 1
  }
  mkdir -p "$(dirname "$bin")"
  mv "$tmp/$name" "$bin"
  echo "$version" >"$stamp"
}
