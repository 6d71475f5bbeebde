//go:build tools

// Package tools pins kube-apiserver and kubectl as Go module dependencies so that
// scripts/setup.d/30-kube-apiserver.sh can `go build` them at exactly these versions.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
