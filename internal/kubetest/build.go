package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Version is the Kubernetes release internal/kubetest/kubebin/go.mod pins.
const Version = "v1.37.2"

// Build returns the path of a kube-apiserver built from internal/kubetest/kubebin, building
// it when the cache has none for this version and Go: under $TERDUT_KUBE_CACHE, else the
// user's cache directory, in terdut-server-kube/. A cold build takes minutes (about 6 on two
// busy cores); once built, the program is reused by every later run on the machine.
func Build() (string, error) {
	cache := os.Getenv("TERDUT_KUBE_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kubetest: no cache directory (set TERDUT_KUBE_CACHE): %w", err)
		}
		cache = filepath.Join(dir, "terdut-server-kube")
	}
	bin := filepath.Join(cache, fmt.Sprintf("kube-apiserver-%s-%s-%s-%s", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	moduleDir, err := kubebinDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Built beside its final name and renamed, so that a build cut short leaves nothing that
	// a later run would take for a program; two packages building at once each rename a
	// whole program.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "k8s.io/kubernetes/cmd/kube-apiserver")
	cmd.Dir = moduleDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("kubetest: go build in %s: %w\n%s", moduleDir, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// kubebinDir finds internal/kubetest/kubebin from this source file's place, so that Build
// works from any package's test directory.
func kubebinDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("kubetest: cannot find its own source to locate kubebin")
	}
	dir := filepath.Join(filepath.Dir(file), "kubebin")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	return dir, nil
}
