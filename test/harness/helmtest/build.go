// Package helmtest runs terdut-server's Helm chart (deploy/helm/terdut-server) through the
// real programs: helm (lint, template, install, upgrade, rollback), controller-gen (the
// monitoring CRDs, made from the Prometheus Operator's API as that project makes them) and
// promtool (the chart's alerts), each built from the module helmbin pins, and the Gateway API
// CRDs of that module. The tests, behind the build tag "chart", apply every preset of the
// chart to the real kube-apiserver of test/harness/kubetest.
package helmtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Tools are the programs the tests run.
type Tools struct {
	Helm, Promtool, ControllerGen string
}

// programs are the packages of helmbin/go.mod's tool lines, by the name of their binary.
var programs = map[string]string{
	"helm":           "helm.sh/helm/v4/cmd/helm",
	"promtool":       "github.com/prometheus/prometheus/cmd/promtool",
	"controller-gen": "sigs.k8s.io/controller-tools/cmd/controller-gen",
}

// Build returns the programs, building them when the cache has none for helmbin's go.sum and
// this Go: under $TERDUT_HELM_CACHE, else the user's cache directory, in terdut-server-helm/.
// A cold build takes minutes; later runs on the machine reuse the programs.
func Build() (Tools, error) {
	dir, err := ModuleDir()
	if err != nil {
		return Tools{}, err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return Tools{}, err
	}
	h := sha256.Sum256(append(sum, runtime.Version()+runtime.GOOS+runtime.GOARCH...))
	cache := os.Getenv("TERDUT_HELM_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return Tools{}, fmt.Errorf("helmtest: no cache directory (set TERDUT_HELM_CACHE): %w", err)
		}
		cache = filepath.Join(base, "terdut-server-helm")
	}
	bin := filepath.Join(cache, hex.EncodeToString(h[:8]))
	t := Tools{Helm: filepath.Join(bin, "helm"), Promtool: filepath.Join(bin, "promtool"), ControllerGen: filepath.Join(bin, "controller-gen")}
	missing := false
	for _, p := range []string{t.Helm, t.Promtool, t.ControllerGen} {
		if _, err := os.Stat(p); err != nil {
			missing = true
		}
	}
	if !missing {
		return t, nil
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return Tools{}, err
	}
	// Built into a directory of this process and renamed, so that a build cut short leaves
	// nothing a later run would take for a program, and two test processes building at once
	// each rename whole programs.
	tmp, err := os.MkdirTemp(bin, "build-")
	if err != nil {
		return Tools{}, err
	}
	defer os.RemoveAll(tmp)
	// remove_all_sd leaves Prometheus's service discovery (every cloud's SDK) out of promtool:
	// checking and testing rules needs none of it, and it is most of the build.
	args := []string{"build", "-tags", "remove_all_sd", "-o", tmp + string(filepath.Separator)}
	for _, pkg := range programs {
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return Tools{}, fmt.Errorf("helmtest: go build in %s: %w\n%s", dir, err, out)
	}
	for name := range programs {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(bin, name)); err != nil {
			return Tools{}, err
		}
	}
	return t, nil
}

// ModuleDir is test/harness/helmtest/helmbin, found from this source file's place.
func ModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("helmtest: cannot find its own source to locate helmbin")
	}
	dir := filepath.Join(filepath.Dir(file), "helmbin")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("helmtest: %w", err)
	}
	return dir, nil
}

// ChartDir is deploy/helm/terdut-server.
func ChartDir() (string, error) {
	dir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "..", "..", "..", "..", "deploy", "helm", "terdut-server"), nil
}

// moduleSource is the directory of a module of helmbin's graph in the module cache,
// downloaded when missing.
func moduleSource(path string) (string, error) {
	dir, err := ModuleDir()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", path)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helmtest: go mod download %s: %w", path, err)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("helmtest: go mod download %s: %s (%v)", path, m.Error, err)
	}
	return m.Dir, nil
}
