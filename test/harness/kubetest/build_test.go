package kubetest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// TestCachedBuild_Once: packages that ask for the same program at once, on an empty cache,
// get it built once (a go on the PATH that counts its builds stands in front of the real one),
// all take the same file, which runs, and no half-built file is left.
func TestCachedBuild_Once(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	cache, module, wrapper := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("TERDUT_KUBE_CACHE", cache)
	count := filepath.Join(wrapper, "builds")
	script := "#!/bin/sh\n[ \"$1\" = build ] && echo build >> " + count + "\nexec " + goBin + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(wrapper, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", wrapper+string(os.PathListSeparator)+os.Getenv("PATH"))
	for name, text := range map[string]string{
		"go.mod":  "module example.test/hello\n\ngo 1.24\n",
		"main.go": "package main\n\nvar greeting = \"unset\"\n\nfunc main() { println(greeting) }\n",
	} {
		if err := os.WriteFile(filepath.Join(module, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	const askers = 4
	paths := make([]string, askers)
	var wg sync.WaitGroup
	for i := range askers {
		wg.Go(func() {
			p, err := kubetest.CachedBuild("hello", module, ".", "-X main.greeting=built")
			if err != nil {
				t.Errorf("asker %d: %v", i, err)
			}
			paths[i] = p
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	builds, err := os.ReadFile(count)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(builds), "build\n"); n != 1 {
		t.Fatalf("%d askers at once ran go build %d times, want once", askers, n)
	}
	for i, p := range paths {
		if p != paths[0] {
			t.Fatalf("asker %d got %s, asker 0 %s", i, p, paths[0])
		}
	}
	out, err := exec.Command(paths[0]).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "built" {
		t.Fatalf("the program: %q, %v", out, err)
	}
	left, err := filepath.Glob(filepath.Join(cache, "*.tmp"))
	if err != nil || len(left) > 0 {
		t.Fatalf("half-built files left: %v (%v)", left, err)
	}
}
