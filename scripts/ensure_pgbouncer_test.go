package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEnsurePgBouncer_StartsNoService: Debian's pgbouncer enables and starts its service on
// install; the tests want none (they start their own on loopback). The install runs under a
// policy-rc.d that denies every start, and on a systemd host the unit is then disabled and
// stopped. apt-get and systemctl are the test's own, on PATH, as in TestEnsurePatroni.
func TestEnsurePgBouncer_StartsNoService(t *testing.T) {
	asRoot(t)
	bin, work := t.TempDir(), t.TempDir()
	policy := filepath.Join(work, "policy-rc.d")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("apt-get", `[[ $1 == install || $* == *" install "* ]] || exit 0
if [[ -x $TERDUT_POLICY_RC_D ]]; then "$TERDUT_POLICY_RC_D" pgbouncer start; echo "policy $?" >>"$WORK/notes"; else echo "policy none" >>"$WORK/notes"; fi
printf '#!/bin/sh\necho "PgBouncer 1.18.0"\n' >"$BIN/pgbouncer"; chmod +x "$BIN/pgbouncer"
`)
	write("systemctl", `case $1 in is-system-running) echo running ;; cat) exit 0 ;; *) echo "systemctl $*" >>"$WORK/notes" ;; esac
`)
	// A PATH without pgbouncer: the test's bin first, then the system's, each directory that
	// holds it replaced by a copy of its links less it.
	path := []string{bin}
	for i, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		filtered := filepath.Join(work, "path", strconv.Itoa(i))
		if err := os.MkdirAll(filtered, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() == "pgbouncer" {
				continue
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), filepath.Join(filtered, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		path = append(path, filtered)
	}
	cmd := exec.Command("bash", "ensure-pgbouncer.sh")
	cmd.Env = append(os.Environ(), "PATH="+strings.Join(path, ":"), "BIN="+bin, "WORK="+work, "TERDUT_POLICY_RC_D="+policy,
		"TERDUT_PGBOUNCER_DEBIAN="+filepath.Join(work, "no-such-pgbouncer"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ensure-pgbouncer.sh: %v\n%s", err, out)
	}
	notes, _ := os.ReadFile(filepath.Join(work, "notes"))
	if !strings.Contains(string(notes), "policy 101") {
		t.Errorf("during the install, policy-rc.d for pgbouncer start: got %q, want 101 (denied)", notes)
	}
	if !strings.Contains(string(notes), "systemctl disable --now pgbouncer.service\n") {
		t.Errorf("on a systemd host: want pgbouncer disabled and stopped; systemctl calls:\n%s", notes)
	}
	if _, err := os.Stat(policy); !os.IsNotExist(err) {
		t.Errorf("policy-rc.d after the install: got %v, want it gone", err)
	}
	if !strings.Contains(string(out), "PgBouncer 1.18.0") {
		t.Errorf("got output %q, want the installed version named", out)
	}
}
