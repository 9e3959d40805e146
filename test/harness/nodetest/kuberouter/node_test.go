//go:build node

package kuberouter

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// mustHost fails the test unless it may change this host's iptables and ipsets: it runs as
// root, and no kube-router runs (Cleanup would take away a live one's chains, and it would
// make them again).
func mustHost(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("kuberouter: the node tests change the host's iptables and ipsets and need root")
	}
	if pid, path := running(); pid != "" {
		tb.Fatalf("kuberouter: a kube-router runs (pid %s, %s): stop it before the node tests", pid, path)
	}
}

// mustRun runs a command that has to succeed and returns its output.
func mustRun(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// hashName names a chain or ipset as kube-router does: a prefix and 16 characters of a base32
// SHA-256, here of the test's process and what the name is for.
func hashName(prefix, what string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "terdut-%d-%s", os.Getpid(), what))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// rules returns the rules of a filter chain as `iptables -S` prints them, or nil when the
// chain does not exist.
func rules(ipt, chain string) []string {
	out, err := exec.Command(ipt, "-t", "filter", "-S", chain).Output()
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// jumpsToTheirs tells a rule jumping to one of kube-router's top-level chains, as `iptables
// -S` prints it, from one naming it in a comment.
func jumpsToTheirs(rule string) bool {
	return strings.HasSuffix(rule, "-j KUBE-ROUTER-INPUT") || strings.HasSuffix(rule, "-j KUBE-ROUTER-FORWARD") ||
		strings.HasSuffix(rule, "-j KUBE-ROUTER-OUTPUT")
}

func sets(tb testing.TB) []string {
	tb.Helper()
	return strings.Fields(mustRun(tb, "ipset", "list", "-n"))
}

func TestCleanup(t *testing.T) {
	mustHost(t)
	var (
		policy = hashName("KUBE-NWPLCY-", "policy")
		pod    = hashName("KUBE-POD-FW-", "pod")
		src    = hashName("KUBE-SRC-", "src")
		dst    = hashName("KUBE-DST-", "dst")
		tmp    = "TMP-" + base32.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%010d", os.Getpid())))
		keep   = fmt.Sprintf("TERDUT-KR-%d", os.Getpid())
		theirs = []string{"KUBE-ROUTER-INPUT", "KUBE-ROUTER-FORWARD", "KUBE-ROUTER-OUTPUT", "KUBE-NWPLCY-DEFAULT", policy, pod}
	)
	// What the test made outlives a failure in the middle only as names Cleanup knows, and
	// its own, removed here.
	t.Cleanup(func() {
		if err := Cleanup(); err != nil {
			t.Errorf("Cleanup at the end: %v", err)
		}
		for _, ipt := range []string{"iptables", "ip6tables"} {
			for _, r := range rules(ipt, "FORWARD") {
				if strings.HasSuffix(r, "-j "+keep) {
					_ = exec.Command("sh", "-c", ipt+" -t filter "+strings.Replace(r, "-A ", "-D ", 1)).Run()
				}
			}
			_ = exec.Command(ipt, "-t", "filter", "-F", keep).Run()
			_ = exec.Command(ipt, "-t", "filter", "-X", keep).Run()
		}
		_ = exec.Command("ipset", "destroy", keep).Run()
	})

	// kube-router's top-level chains have fixed names: an earlier run cut short may have left
	// them.
	if err := Cleanup(); err != nil {
		t.Fatalf("Cleanup before the test: %v", err)
	}
	mustRun(t, "ipset", "create", src, "hash:ip")
	mustRun(t, "ipset", "create", dst, "hash:ip")
	mustRun(t, "ipset", "create", "inet6:"+src, "hash:ip", "family", "inet6")
	mustRun(t, "ipset", "create", tmp, "hash:ip")
	mustRun(t, "ipset", "create", keep, "hash:ip")
	for _, ipt := range []string{"iptables", "ip6tables"} {
		set := src
		if ipt == "ip6tables" {
			set = "inet6:" + src
		}
		for _, c := range append(slices.Clone(theirs), keep) {
			mustRun(t, ipt, "-t", "filter", "-N", c)
		}
		// As kube-router v2.1.0 makes them: jumps from the built-in chains at their top, its
		// chains jumping to each other, a policy chain matching an ipset.
		for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
			mustRun(t, ipt, "-t", "filter", "-I", c, "1", "-m", "comment", "--comment", "kube-router netpol - "+hashName("", c), "-j", "KUBE-ROUTER-"+c)
		}
		mustRun(t, ipt, "-t", "filter", "-A", "KUBE-ROUTER-FORWARD", "-j", pod)
		mustRun(t, ipt, "-t", "filter", "-A", pod, "-j", policy)
		mustRun(t, ipt, "-t", "filter", "-A", pod, "-j", "KUBE-NWPLCY-DEFAULT")
		mustRun(t, ipt, "-t", "filter", "-A", policy, "-m", "set", "--match-set", set, "src", "-j", "MARK", "--set-xmark", "0x10000/0x10000")
		mustRun(t, ipt, "-t", "filter", "-A", "KUBE-NWPLCY-DEFAULT", "-j", "MARK", "--set-xmark", "0x10000/0x10000")
		// Not kube-router's: a chain of another program, jumped to from FORWARD by a rule
		// whose comment names kube-router's chain, and matching one of kube-router's ipsets'
		// neighbours.
		mustRun(t, ipt, "-t", "filter", "-A", "FORWARD", "-m", "comment", "--comment", "not -j KUBE-ROUTER-FORWARD", "-j", keep)
		if ipt == "iptables" {
			mustRun(t, ipt, "-t", "filter", "-A", keep, "-m", "set", "--match-set", keep, "src", "-j", "RETURN")
		} else {
			mustRun(t, ipt, "-t", "filter", "-A", keep, "-j", "RETURN")
		}
	}
	before := map[string][]string{}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, c := range []string{"INPUT", "FORWARD", "OUTPUT", keep} {
			before[ipt+" "+c] = rules(ipt, c)
		}
	}

	for round := 1; round <= 2; round++ {
		if err := Cleanup(); err != nil {
			t.Fatalf("Cleanup round %d: %v", round, err)
		}
		for _, ipt := range []string{"iptables", "ip6tables"} {
			for _, c := range theirs {
				if r := rules(ipt, c); r != nil {
					t.Errorf("round %d: %s chain %s: got %q, want it gone", round, ipt, c, r)
				}
			}
			for _, c := range []string{"INPUT", "FORWARD", "OUTPUT", keep} {
				now := rules(ipt, c)
				for _, r := range now {
					if jumpsToTheirs(r) {
						t.Errorf("round %d: %s %s still jumps to kube-router: %s", round, ipt, c, r)
					}
				}
				for _, r := range before[ipt+" "+c] {
					if !jumpsToTheirs(r) && !slices.Contains(now, r) {
						t.Errorf("round %d: %s %s lost a rule not kube-router's: %s", round, ipt, c, r)
					}
				}
			}
		}
		left := sets(t)
		for _, s := range []string{src, dst, "inet6:" + src, tmp} {
			if slices.Contains(left, s) {
				t.Errorf("round %d: ipset %s: still there, want it destroyed", round, s)
			}
		}
		if !slices.Contains(left, keep) {
			t.Errorf("round %d: ipset %s: destroyed, want it kept", round, keep)
		}
	}
}

// TestArgs runs the built kube-router with Args and --version, which exits after reading every
// flag and before it needs a cluster: a flag it does not know fails it.
func TestArgs(t *testing.T) {
	bin, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	version := func(extra ...string) (string, error) {
		args := append(Args("/nonexistent/kubeconfig", "node-1", 0), extra...)
		out, err := exec.Command(bin, append(args, "--version")...).CombinedOutput()
		return string(out), err
	}
	out, err := version()
	if err != nil {
		t.Fatalf("kube-router %v --version: %v\n%s", Args("/nonexistent/kubeconfig", "node-1", 0), err, out)
	}
	if want := "version " + Version + ", built on"; !strings.Contains(out, want) {
		t.Errorf("--version: got %q, want it to contain %q", out, want)
	}
	if out, err := version("--no-such-flag"); err == nil {
		t.Errorf("an unknown flag: got success (%q), want kube-router to refuse it", out)
	}
}

// TestCleanup_RefusesBesideKubeRouter runs a program named as Build names kube-router (a copy
// of sleep) and checks that Cleanup refuses to touch the host while it runs.
func TestCleanup_RefusesBesideKubeRouter(t *testing.T) {
	mustHost(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "kube-router-"+Version+"-fake")
	mustRun(t, "cp", sleep, fake)
	p, err := proctest.Start("fake kube-router", fake, []string{"600"}, nil, fake+".log", proctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(syscall.SIGKILL, time.Minute)
	err = Cleanup()
	if err == nil || !strings.Contains(err.Error(), fake) {
		t.Errorf("Cleanup beside %s: got %v, want a refusal naming it", fake, err)
	}
}
