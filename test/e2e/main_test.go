// Package e2e tests terdut-server end to end: real processes of the built binary, started
// with TERDUT_* settings as Kubernetes would start them, over a real Postgres database, with
// people signing in through a real OIDC provider and the operator using the client package.
package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// envBinary hands the built binary from TestMain to the test process it runs.
const envBinary = "TERDUT_E2E_BINARY"

// binary is the path of the terdut-server binary under test.
var binary string

// TestMain builds the binary once, then runs the tests in a child process of this test
// binary with pgtest.Main. pgtest.Main ends the process with os.Exit, so the child is what
// lets the parent remove the build directory afterwards.
func TestMain(m *testing.M) {
	if binary = os.Getenv(envBinary); binary != "" {
		pgtest.Main(m, nil) // the binary migrates its database itself
		return
	}
	os.Exit(buildAndRunTests())
}

func buildAndRunTests() int {
	dir, err := os.MkdirTemp("", "terdut-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "terdut-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/terdut-server/terdut-server/cmd/terdut-server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build terdut-server:", err)
		return 2
	}
	tests := exec.Command(os.Args[0], os.Args[1:]...)
	tests.Env = append(os.Environ(), envBinary+"="+bin)
	tests.Stdin, tests.Stdout, tests.Stderr = os.Stdin, os.Stdout, os.Stderr
	dieWithParent(tests)
	err = tests.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "e2e: run the tests:", err)
	return 1
}
