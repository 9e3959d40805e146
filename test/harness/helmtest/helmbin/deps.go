//go:build tools

// Package helmbin has no code of its own: it pins the test-only programs and modules of
// test/harness/helmtest (see go.mod).
package helmbin

import (
	// The monitoring API whose CRDs controller-gen makes (ServiceMonitor, PrometheusRule;
	// AlertmanagerConfig from v1alpha1).
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	// Gateway API's module: its CRD YAML (config/crd) is installed in the test's API server.
	_ "sigs.k8s.io/gateway-api/apis/v1"
)
