//go:build tools

// Package tools pins helm as a Go module dependency so that scripts/setup.d/34-helm.sh can
// `go build` it at exactly this version, with the k8s.io modules of
// scripts/kube-tools/kubernetes (one Go build cache for both).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
