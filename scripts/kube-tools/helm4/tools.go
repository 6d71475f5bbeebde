//go:build tools

// Package tools pins Helm 4 as a Go module dependency so that scripts/setup.d/37-helm4.sh can
// `go build` it at exactly this version, beside Helm 3 (scripts/kube-tools/helm).
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
