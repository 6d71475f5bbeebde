//go:build tools

// Package tools pins the node and control-plane binaries of the end-to-end cluster (kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy) at the same k8s.io/kubernetes version as
// the kube-apiserver of scripts/kube-tools/kubernetes, so scripts/e2e/setup.sh can `go build`
// them; identical versions let the Go build cache share every common package.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
