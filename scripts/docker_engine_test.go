// Package scripts tests the shell scripts that CI and `make` run as root: what they touch,
// and whom they signal.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEngine writes a docker and a dockerd of the test's own into a directory and returns
// it, for the front of PATH: dockerd writes its -H socket path as a plain file and sleeps
// (it serves nothing), and docker answers when the file that DOCKER_HOST names exists. So
// scripts/docker-engine.sh starts and stops "an engine" without one, and without installing
// Debian's docker.io.
func fakeEngine(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("dockerd", `while [[ $# -gt 0 ]]; do
  case $1 in -H) sock=${2#unix://}; shift ;; --version) echo "Docker version 0.0.0-fake, build x"; exit 0 ;; esac
  shift
done
: >"$sock"
# What dockerd leaves running when it stops, as its containerd does: a child in its session,
# naming the state directory.
(exec -a "containerd-fake --address ${sock%/*}/exec/containerd.sock" sleep 301) &
exec sleep 300
`)
	write("docker", `[[ -n ${DOCKER_HOST:-} && -e ${DOCKER_HOST#unix://} ]]
`)
	return bin
}

// inPIDNamespace runs script with bash in a PID namespace of its own (with its own /proc),
// so that whatever a signal it sends reaches, even "every process" (kill -1), is in there:
// the script is PID 1, whom kill -1 spares. It returns the combined output.
func inPIDNamespace(t *testing.T, env []string, script string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("scripts/docker-engine.sh starts its engine as root: run this test as root (CI does)")
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "bash", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("exit: %v", err)
	}
	return string(out)
}

func engineEnv(t *testing.T, dir string) []string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + fakeEngine(t) + ":" + os.Getenv("PATH"), "TERDUT_DOCKER_DIR=" + dir,
		"ENGINE=" + filepath.Join(wd, "docker-engine.sh"), "DOCKER_HOST="}
}

// TestDockerEngine_StopSignalsOnlyItsEngine: stop signals the dockerd that start started,
// and nothing that merely has its number: a PID file left stale (the engine died, the number
// went to another process) or naming -1 (which kill -0 takes for "every process") leaves an
// unrelated process alive. The unrelated process is a sleep of the test's own, and all of
// it runs in a PID namespace of its own.
func TestDockerEngine_StopSignalsOnlyItsEngine(t *testing.T) {
	start := `unset DOCKER_HOST
"$ENGINE" start >/dev/null || exit 1
engine=$(awk '{print $1; exit}' "$TERDUT_DOCKER_DIR/started.pid")
`
	for _, tt := range []struct{ name, pid string }{
		{"StalePIDReused", "$other"},
		{"MinusOne", "-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "engine")
			out := inPIDNamespace(t, engineEnv(t, dir), start+`kill -KILL "$engine"; wait "$engine" 2>/dev/null
sleep 300 & other=$!
sed -i "1s/^[^ ]*/`+tt.pid+`/" "$TERDUT_DOCKER_DIR/started.pid"
"$ENGINE" stop
kill -0 "$other" 2>/dev/null && echo UNRELATED-ALIVE
`)
			if !strings.Contains(out, "UNRELATED-ALIVE") {
				t.Fatalf("stop with started.pid naming %s: the unrelated process was signalled; output:\n%s", tt.pid, out)
			}
		})
	}
	t.Run("OK", func(t *testing.T) {
		// What the engine left running is stopped with it; a process that only names the
		// state directory (a person's tail -f of its log) is not the engine's, and lives.
		dir := filepath.Join(t.TempDir(), "engine")
		out := inPIDNamespace(t, engineEnv(t, dir), start+`(exec -a "tail -f $TERDUT_DOCKER_DIR/dockerd.log" sleep 302) & other=$!
left=$(pgrep -f "^containerd-fake --address $TERDUT_DOCKER_DIR/") || echo NO-CONTAINERD
"$ENGINE" stop
sleep 0.5
kill -0 "$engine" 2>/dev/null && echo ENGINE-ALIVE
kill -0 "$left" 2>/dev/null && echo CONTAINERD-ALIVE
kill -0 "$other" 2>/dev/null || echo UNRELATED-SIGNALLED
[[ -e $TERDUT_DOCKER_DIR/started.pid ]] && echo PIDFILE-LEFT
kill "$other"
echo done
`)
		for _, bad := range []string{"ENGINE-ALIVE", "NO-CONTAINERD", "CONTAINERD-ALIVE", "UNRELATED-SIGNALLED", "PIDFILE-LEFT"} {
			if strings.Contains(out, bad) || !strings.Contains(out, "done") {
				t.Fatalf("stop: want the engine it started and what it left stopped, its PID file gone, and nothing else signalled; got %s; output:\n%s", bad, out)
			}
		}
	})
}

// TestDockerEngine_StateDirectory: the engine's directory is made by the script, atomically,
// root's alone, and verified; one that someone else made or planted (a symlink, another
// user's directory holding a symlink where the log goes) is refused, and nothing is written
// through it.
func TestDockerEngine_StateDirectory(t *testing.T) {
	victim := func(t *testing.T) string {
		p := filepath.Join(t.TempDir(), "root-only")
		if err := os.WriteFile(p, []byte("precious\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	intact := func(t *testing.T, p string) {
		t.Helper()
		if b, err := os.ReadFile(p); err != nil || string(b) != "precious\n" {
			t.Errorf("the root-only file: got %q, %v, want it untouched", b, err)
		}
	}
	t.Run("ErrSymlink", func(t *testing.T) {
		v := victim(t)
		dir := filepath.Join(t.TempDir(), "engine")
		if err := os.Symlink(filepath.Dir(v), dir); err != nil {
			t.Fatal(err)
		}
		out := inPIDNamespace(t, engineEnv(t, dir), `"$ENGINE" start && echo STARTED`)
		if strings.Contains(out, "STARTED") {
			t.Errorf("start through a symlink: started; output:\n%s", out)
		}
		if entries, _ := os.ReadDir(filepath.Dir(v)); len(entries) != 1 {
			t.Errorf("the symlink's target: got %d entries, want only the file that was there", len(entries))
		}
		intact(t, v)
	})
	t.Run("ErrAnotherUsersDirectory", func(t *testing.T) {
		v := victim(t)
		dir := filepath.Join(t.TempDir(), "engine")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(v, filepath.Join(dir, "dockerd.log")); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		out := inPIDNamespace(t, engineEnv(t, dir), `"$ENGINE" start && echo STARTED`)
		if strings.Contains(out, "STARTED") {
			t.Errorf("start in another user's directory: started; output:\n%s", out)
		}
		intact(t, v)
	})
	t.Run("ErrNotMadeByTheScript", func(t *testing.T) {
		// Root's own, private, but made by hand: not the script's, so not its to use or stop in.
		dir := filepath.Join(t.TempDir(), "engine")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		out := inPIDNamespace(t, engineEnv(t, dir), `"$ENGINE" start && echo STARTED`)
		if strings.Contains(out, "STARTED") {
			t.Errorf("start in a directory the script did not make: started; output:\n%s", out)
		}
	})
	t.Run("OK", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "engine")
		out := inPIDNamespace(t, engineEnv(t, dir), `"$ENGINE" start >/dev/null && stat -c '%a %u' "$TERDUT_DOCKER_DIR" && "$ENGINE" stop`)
		if !strings.Contains(out, "700 0") {
			t.Errorf("the engine's directory: want mode 700, owner root; output:\n%s", out)
		}
	})
}
