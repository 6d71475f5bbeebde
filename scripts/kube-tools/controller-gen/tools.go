//go:build tools

// Package tools pins controller-gen and the prometheus-operator API types it reads, so that
// scripts/setup.d/30-kube-apiserver.sh generates the ServiceMonitor and PrometheusRule CRDs
// from exactly this version of github.com/prometheus-operator/prometheus-operator.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
