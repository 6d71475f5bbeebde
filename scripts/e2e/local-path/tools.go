//go:build tools

// Package tools pins the dynamic provisioner of the end-to-end cluster's `local-path`
// StorageClass, github.com/rancher/local-path-provisioner, at the exact version of go.mod, so
// scripts/e2e/setup.sh can `go build` it (its module root is its main package). Its own
// dependency versions are kept as it pins them: it builds against client-go v0.30, which talks
// to the cluster's v1.36 API server as any older client does.
package tools

import (
	_ "github.com/rancher/local-path-provisioner"
)
