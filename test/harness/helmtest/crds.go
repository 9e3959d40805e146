package helmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// GatewayAPIModule is the module whose config/crd/standard holds the Gateway API CRDs the
// chart's HTTPRoute needs; helmbin/go.mod pins its version.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// GatewayCRDs returns the files of Gateway API's standard channel, from the module cache.
func GatewayCRDs() ([]string, error) {
	dir, err := moduleSource(GatewayAPIModule)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("helmtest: no CRDs in %s/config/crd/standard (%v)", dir, err)
	}
	return files, nil
}

// ZalandoModule is Zalando's postgres-operator at the release whose CRD of the postgresql
// resource (manifests/postgresql.crd.yaml) docs/install.md's example is checked against. It is
// downloaded as a module, not required by helmbin: nothing of it is built.
const ZalandoModule = "github.com/zalando/postgres-operator@v1.15.1"

// ZalandoCRD returns the file of postgres-operator's postgresql CRD, from the module cache.
func ZalandoCRD() (string, error) {
	dir, err := moduleSource(ZalandoModule)
	if err != nil {
		return "", err
	}
	f := filepath.Join(dir, "manifests", "postgresql.crd.yaml")
	if _, err := os.Stat(f); err != nil {
		return "", fmt.Errorf("helmtest: %w", err)
	}
	return f, nil
}

// MonitoringPackages are the Prometheus Operator's APIs the chart's objects use: v1, of
// ServiceMonitor and PrometheusRule, and v1alpha1, of AlertmanagerConfig (the version its
// CRD stores; v1beta1 needs the operator's conversion webhook).
var MonitoringPackages = []string{
	"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1",
	"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1",
}

// MonitoringCRDs makes the CRDs of MonitoringPackages with controller-gen into dir, as the
// Prometheus Operator makes its own (crd:crdVersions=v1 over its API packages), and returns
// the files of the kinds named (their plural, such as servicemonitors).
func MonitoringCRDs(t Tools, dir string, plurals ...string) ([]string, error) {
	module, err := ModuleDir()
	if err != nil {
		return nil, err
	}
	args := []string{"crd:crdVersions=v1"}
	for _, p := range MonitoringPackages {
		args = append(args, "paths="+p)
	}
	cmd := exec.Command(t.ControllerGen, append(args, "output:crd:dir="+dir)...)
	cmd.Dir = module
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("helmtest: controller-gen: %w\n%s", err, out)
	}
	var files []string
	for _, p := range plurals {
		f := filepath.Join(dir, "monitoring.coreos.com_"+p+".yaml")
		if _, err := os.Stat(f); err != nil {
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			slices.Sort(names)
			return nil, fmt.Errorf("helmtest: controller-gen made %v, want %s among them", names, filepath.Base(f))
		}
		files = append(files, f)
	}
	return files, nil
}
