package amtest

import (
	"os/exec"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	bin := mustBinary(t)
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	if want := "version " + strings.TrimPrefix(Version, "v"); !strings.Contains(string(out), want) {
		t.Errorf("%s --version: got %q, want it to say %q", bin, out, want)
	}
}
