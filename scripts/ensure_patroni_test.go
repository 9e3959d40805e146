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
// start, and on a systemd host the units are then disabled and stopped.
func TestEnsurePatroni_StartsNoService(t *testing.T) {
	asRoot(t)
	notes, _, policyLeft := runEnsureInstall(t, "ensure-patroni.sh", []string{"patroni", "etcd", "etcdctl", "haproxy"})
	if !strings.Contains(notes, "policy 101") {
		t.Errorf("during the install, policy-rc.d for etcd start: got %q, want 101 (denied)", notes)
	}
	for _, unit := range []string{"etcd", "haproxy", "patroni"} {
		if !strings.Contains(notes, "systemctl disable --now "+unit+".service\n") {
			t.Errorf("on a systemd host: want %s disabled and stopped; systemctl calls:\n%s", unit, notes)
		}
	}
	if policyLeft {
		t.Error("policy-rc.d after the install: got it there, want it gone")
	}
}

// TestEnsureKube_StartsNoService: the Kubernetes suite's etcd-server is installed as
// ensure-patroni.sh installs it: its service does not start during the install (policy-rc.d
// denies it), and on a systemd host its unit is then disabled and stopped; the suite runs its
// own etcd on free ports.
func TestEnsureKube_StartsNoService(t *testing.T) {
	asRoot(t)
	notes, _, policyLeft := runEnsureInstall(t, "ensure-kube.sh", []string{"etcd"})
	if !strings.Contains(notes, "policy 101") {
		t.Errorf("during the install, policy-rc.d for etcd start: got %q, want 101 (denied)", notes)
	}
	if !strings.Contains(notes, "systemctl disable --now etcd.service\n") {
		t.Errorf("on a systemd host: want etcd disabled and stopped; systemctl calls:\n%s", notes)
	}
	if policyLeft {
		t.Error("policy-rc.d after the install: got it there, want it gone")
	}
}

// runEnsureInstall runs the ensure script with none of programs on PATH and env added to its
// environment, and returns the notes of the test's own apt-get and systemctl, the script's
// output, and whether a policy-rc.d was left behind. apt-get notes what policy-rc.d answers
// for a service's start at install time and "installs" the programs (each prints its name
// and a version); systemctl plays a running systemd and notes its calls.
func runEnsureInstall(t *testing.T, script string, programs []string, env ...string) (notes, out string, policyLeft bool) {
	t.Helper()
	bin, work := t.TempDir(), t.TempDir()
	policy := filepath.Join(work, "policy-rc.d")
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("apt-get", `[[ $1 == install || $* == *" install "* ]] || exit 0
if [[ -x $TERDUT_POLICY_RC_D ]]; then "$TERDUT_POLICY_RC_D" etcd start; echo "policy $?" >>"$WORK/notes"; else echo "policy none" >>"$WORK/notes"; fi
for p in $PROGRAMS; do printf '#!/bin/sh\necho "%s 0"\n' "$p" >"$BIN/$p"; chmod +x "$BIN/$p"; done
`)
	write("systemctl", `case $1 in is-system-running) echo running ;; cat) exit 0 ;; *) echo "systemctl $*" >>"$WORK/notes" ;; esac
`)
	// A PATH with none of the programs: the test's bin first, then the system's, each
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
			if strings.Contains(" "+strings.Join(programs, " ")+" ", " "+e.Name()+" ") {
				continue
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), filepath.Join(filtered, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		path = append(path, filtered)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(append(os.Environ(), "PATH="+strings.Join(path, ":"), "BIN="+bin, "WORK="+work,
		"TERDUT_POLICY_RC_D="+policy, "PROGRAMS="+strings.Join(programs, " ")), env...)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, output)
	}
	b, _ := os.ReadFile(filepath.Join(work, "notes"))
	_, err = os.Stat(policy)
	return string(b), string(output), !os.IsNotExist(err)
}
