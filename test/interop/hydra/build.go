// Package hydra runs Ory Hydra v2.3.0, built from its Go module, as a local process for
// terdut-server's interop tests, and plays the login and consent app Hydra leaves to its
// users, through Hydra's admin API.
package hydra

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Version is the Hydra release test/interop/hydrabin/go.mod pins (see the comment there).
const Version = "v2.3.0"

// Build returns the path of a Hydra program built from test/interop/hydrabin (moduleDir), building
// it when the cache has none for this version and Go: under $TERDUT_INTEROP_CACHE, else the
// user's cache directory, in terdut-server-interop/. A cold build takes minutes; once built,
// the program is reused by every later run.
func Build(moduleDir string) (string, error) {
	cache := os.Getenv("TERDUT_INTEROP_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("hydra: no cache directory (set TERDUT_INTEROP_CACHE): %w", err)
		}
		cache = filepath.Join(dir, "terdut-server-interop")
	}
	bin := filepath.Join(cache, fmt.Sprintf("hydra-%s-%s-%s-%s", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Built beside its final name and renamed, so that a build cut short leaves nothing that
	// a later run would take for a program.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-tags", "sqlite,sqlite_omit_load_extension", "-o", tmp, "github.com/ory/hydra/v2")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // its SQLite is cgo
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("hydra: go build in %s: %w\n%s", moduleDir, err, out)
	}
	return bin, os.Rename(tmp, bin)
}
