package kubetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// Version is the Kubernetes release test/harness/kubetest/kubebin/go.mod pins.
const Version = "v1.37.2"

// Build returns the path of a kube-apiserver built from test/harness/kubetest/kubebin (Program).
func Build() (string, error) { return Program("kube-apiserver") }

// Programs are the programs kubebin pins (its go.mod's tool lines): the control plane and
// what a node runs (test/harness/nodetest).
var Programs = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// Program returns the path of the program name (one of Programs, k8s.io/kubernetes/cmd/<name>)
// built from test/harness/kubetest/kubebin, building it when the cache has none for this version
// and Go: under $TERDUT_KUBE_CACHE, else the user's cache directory, in terdut-server-kube/.
// A cold build takes minutes (the API server about 6 on two busy cores, the kubelet about 7,
// all five 25-30); once built, a program is reused by every later run on the machine.
func Program(name string) (string, error) {
	if !slices.Contains(Programs, name) {
		return "", fmt.Errorf("kubetest: %q is not one of the programs kubebin pins %v", name, Programs)
	}
	moduleDir, err := kubebinDir()
	if err != nil {
		return "", err
	}
	// Plain go build stamps v0.0.0-master+$Format:%H$: the version is set as Kubernetes' own
	// build sets it, so that the node reports its kubelet's release.
	major, minor, _ := strings.Cut(strings.TrimPrefix(Version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	ldflags := strings.Join([]string{
		"-X k8s.io/component-base/version.gitVersion=" + Version,
		"-X k8s.io/component-base/version.gitMajor=" + major,
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/client-go/pkg/version.gitVersion=" + Version,
	}, " ")
	return CachedBuild(fmt.Sprintf("%s-%s-%s-%s-%s", name, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH),
		moduleDir, "k8s.io/kubernetes/cmd/"+name, ldflags)
}

// CachedBuild returns the path of the program file in CacheDir, building it first when it is
// not there: go build -ldflags ldflags pkg, in the module at moduleDir. The file's name ends
// with a digest of pkg and ldflags, so that a program built with other flags (another version
// stamped) is never taken for this one. The program is built beside its final name and
// renamed, so that a build cut short leaves nothing that a later run would take for a
// program; builds wait for each other (a lock in CacheDir), so that a program is built once
// however many packages ask for it at once. Only the link
// differs between flags: a rebuild with other flags takes seconds once the packages are built.
func CachedBuild(file, moduleDir, pkg, ldflags string) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(pkg + "\x00" + ldflags))
	bin := filepath.Join(dir, file+"-"+hex.EncodeToString(sum[:4]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// One build at a time in the cache: the packages of a suite start at once, and on a new
	// machine each built the same program (three API servers at once on two cores ran past
	// the tests' 30 minutes). The others wait for the first, then take what it built.
	lock, err := os.OpenFile(filepath.Join(dir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("kubetest: lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", tmp, pkg)
	cmd.Dir = moduleDir
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, moduleDir, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// CacheDir is where built programs are kept: $TERDUT_KUBE_CACHE, else terdut-server-kube in
// the user's cache directory.
func CacheDir() (string, error) {
	if dir := os.Getenv("TERDUT_KUBE_CACHE"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kubetest: no cache directory (set TERDUT_KUBE_CACHE): %w", err)
	}
	return filepath.Join(dir, "terdut-server-kube"), nil
}

// kubebinDir finds test/harness/kubetest/kubebin from this source file's place, so that Build
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
