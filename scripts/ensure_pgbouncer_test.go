package scripts

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsurePgBouncer_StartsNoService: Debian's pgbouncer enables and starts its service on
// install; the tests want none (they start their own on loopback). The install runs under a
// policy-rc.d that denies every start, and on a systemd host the unit is then disabled and
// stopped. apt-get and systemctl are the test's own (runEnsureInstall).
func TestEnsurePgBouncer_StartsNoService(t *testing.T) {
	asRoot(t)
	notes, out, policyLeft := runEnsureInstall(t, "ensure-pgbouncer.sh", []string{"pgbouncer"},
		"TERDUT_PGBOUNCER_DEBIAN="+filepath.Join(t.TempDir(), "no-such-pgbouncer"))
	if !strings.Contains(notes, "policy 101") {
		t.Errorf("during the install, policy-rc.d for a service's start: got %q, want 101 (denied)", notes)
	}
	if !strings.Contains(notes, "systemctl disable --now pgbouncer.service\n") {
		t.Errorf("on a systemd host: want pgbouncer disabled and stopped; systemctl calls:\n%s", notes)
	}
	if policyLeft {
		t.Error("policy-rc.d after the install: got it there, want it gone")
	}
	if !strings.Contains(out, "pgbouncer 0") {
		t.Errorf("got output %q, want the installed version named", out)
	}
}
