package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestMachinery holds the layout docs/developing.md describes: the program links
// the server (cmd/, internal/, migrations/) and never the test machinery under test/, so a harness that
// starts Postgres, a cluster or a browser can never reach the binary or its image.
func TestBinaryLinksNoTestMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/terdut-server/terdut-server/"
	var own int
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		own++
		rest := strings.TrimPrefix(pkg, module)
		if !strings.HasPrefix(rest, "internal/") && rest != "cmd/terdut-server" && rest != "migrations" {
			t.Errorf("terdut-server links %s: only cmd/terdut-server, internal/ and migrations belong in the binary", pkg)
		}
	}
	if own < 5 {
		t.Fatalf("go list -deps named %d of the module's packages; want the program and its internal/ packages:\n%s", own, out)
	}
}
