//go:build tools

// Package tools pins jsonnet-bundler so that scripts/setup.d/15-jsonnet-vendor.sh can
// `go build` its jb command at exactly this version.
package tools

import _ "github.com/jsonnet-bundler/jsonnet-bundler/cmd/jb"
