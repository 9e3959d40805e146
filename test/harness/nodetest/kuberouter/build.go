// Package kuberouter runs kube-router as the NetworkPolicy engine of test/harness/nodetest's
// single-node cluster: it builds the program, gives its firewall-only command line, and
// removes what its network policy controller leaves on the host.
package kuberouter

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// Version is the kube-router release test/harness/nodetest/routerbin/go.mod pins.
const Version = "v2.1.0"

const (
	mainPackage    = "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
	versionPackage = "github.com/cloudnativelabs/kube-router/v2/pkg/version"
)

// Build returns the path of a kube-router built from test/harness/nodetest/routerbin, building it
// when the cache has none for this version and Go: under $TERDUT_KUBE_CACHE, else the user's
// cache directory, in terdut-server-kube/ (the cache test/harness/kubetest keeps its programs in).
// A cold build takes about two minutes; once built, the program is reused by every later run
// on the machine. The program reports Version and its build date to --version.
func Build() (string, error) {
	moduleDir, err := routerbinDir()
	if err != nil {
		return "", err
	}
	// kube-router's own release build stamps its version (unstamped, --version prints none).
	// Its build date is left out: it would make every build's flags, and so its cache name,
	// new.
	ldflags := fmt.Sprintf("-X %s.Version=%s", versionPackage, Version)
	return kubetest.CachedBuild(fmt.Sprintf("kube-router-%s-%s-%s-%s", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH),
		moduleDir, mainPackage, ldflags)
}

// routerbinDir finds test/harness/nodetest/routerbin from this source file's place, so that Build
// works from any package's test directory.
func routerbinDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("kuberouter: cannot find its own source to locate routerbin")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "routerbin")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("kuberouter: %w", err)
	}
	return filepath.Clean(dir), nil
}
