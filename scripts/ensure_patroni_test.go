package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEnsurePatroni_StartsNoService: Debian's etcd-server and haproxy start and enable their
// services on install, on a systemd host too, where the fault suite wants none (etcd would
// listen unauthenticated on 2379). The install runs under a policy-rc.d that denies every
// start, and on a systemd host the units are then disabled and stopped. apt-get and systemctl
// are the test's own, on PATH: the first notes what policy-rc.d answers for etcd at install
// time and "installs" the programs, the second plays a running systemd and notes its calls.
func TestEnsurePatroni_StartsNoService(t *testing.T) {
	asRoot(t)
	bin, work := t.TempDir(), t.TempDir()
	policy := filepath.Join(work, "policy-rc.d")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("apt-get", `[[ $1 == install || $* == *" install "* ]] || exit 0
if [[ -x $TERDUT_POLICY_RC_D ]]; then "$TERDUT_POLICY_RC_D" etcd start; echo "policy $?" >>"$WORK/notes"; else echo "policy none" >>"$WORK/notes"; fi
for p in patroni etcd etcdctl haproxy; do printf '#!/bin/sh\necho "%s 0"\n' "$p" >"$BIN/$p"; chmod +x "$BIN/$p"; done
`)
	write("systemctl", `case $1 in is-system-running) echo running ;; *) echo "systemctl $*" >>"$WORK/notes" ;; esac
`)
	// A PATH with none of the four programs: the test's bin first, then the system's, each
	// directory that holds one of them replaced by a copy of its links less those.
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
			switch e.Name() {
			case "patroni", "etcd", "etcdctl", "haproxy":
				continue
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), filepath.Join(filtered, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		path = append(path, filtered)
	}
	cmd := exec.Command("bash", "ensure-patroni.sh")
	cmd.Env = append(os.Environ(), "PATH="+strings.Join(path, ":"), "BIN="+bin, "WORK="+work, "TERDUT_POLICY_RC_D="+policy)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ensure-patroni.sh: %v\n%s", err, out)
	}
	notes, _ := os.ReadFile(filepath.Join(work, "notes"))
	if !strings.Contains(string(notes), "policy 101") {
		t.Errorf("during the install, policy-rc.d for etcd start: got %q, want 101 (denied)", notes)
	}
	for _, unit := range []string{"etcd", "haproxy", "patroni"} {
		if !strings.Contains(string(notes), "systemctl disable --now "+unit+".service\n") {
			t.Errorf("on a systemd host: want %s disabled and stopped; systemctl calls:\n%s", unit, notes)
		}
	}
	if _, err := os.Stat(policy); !os.IsNotExist(err) {
		t.Errorf("policy-rc.d after the install: got %v, want it gone", err)
	}
}
