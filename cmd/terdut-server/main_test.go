package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// The databases of these tests start empty: the commands under test migrate them themselves.
func TestMain(m *testing.M) { pgtest.Main(m, nil) }

// secretPassword is the password in the database URLs of the tests that check that a URL is
// never printed.
const secretPassword = "hunter2-do-not-print"

// env is a fake environment for run's getenv.
type env map[string]string

func (e env) get(name string) string { return e[name] }

// result is what one call of run did.
type result struct {
	Err    error
	Stdout string
	Stderr string
}

// runCmd runs the program with args in env and waits for it to return.
func runCmd(t *testing.T, e env, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, e.get, &stdout, &stderr)
	return result{Err: err, Stdout: stdout.String(), Stderr: stderr.String()}
}

// mustRun runs the program and fails the test when it returns an error.
func mustRun(t *testing.T, e env, args ...string) result {
	t.Helper()
	r := runCmd(t, e, args...)
	if r.Err != nil {
		t.Fatalf("terdut-server %s: got error %v, want none; stderr:\n%s", strings.Join(args, " "), r.Err, r.Stderr)
	}
	return r
}

// mustFile writes content to a file in a temporary directory and returns its path.
func mustFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// syncBuffer collects what a running server writes, safely read while it writes.
type syncBuffer = apitest.SyncBuffer
