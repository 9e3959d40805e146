package kuberouter

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/terdut-server/terdut-server/test/harness/nodetest/iptables"
)

// The names kube-router v2.1.0's network policy controller gives what it makes
// (pkg/controllers/netpol and pkg/utils/ipset.go): its top-level chains, each jumped to from
// the built-in chain of the same name; KUBE-NWPLCY-DEFAULT; a chain per policy and per pod,
// named by the first 16 characters of a base32 SHA-256; source and destination ipsets named
// alike (IPv6 ones behind "inet6:"); and the TMP- sets it swaps through while it rewrites its
// ipsets (base32 of ten bytes of a SHA-1), left behind when a rewrite fails part-way.
var (
	ownedChain = regexp.MustCompile(`^KUBE-(ROUTER-(INPUT|FORWARD|OUTPUT)|NWPLCY-DEFAULT|NWPLCY-[A-Z2-7]{16}|POD-FW-[A-Z2-7]{16})$`)
	ownedSet   = regexp.MustCompile(`^((inet6:)?KUBE-(SRC|DST)-[A-Z2-7]{16}|TMP-[A-Z2-7]{16})$`)
)

// Cleanup removes from the host what kube-router's network policy controller made there, in
// both address families: the rules in other chains of the filter table that jump to its
// chains, then its chains, then its ipsets. It leaves every other chain, rule and ipset as it
// is, and succeeds when there is nothing to remove. It refuses to run while a kube-router
// runs on the host (it would take away a live one's firewall, which would make it again).
//
// kube-router's own --cleanup-config leaves them and then panics; Cleanup removes them by
// name. It returns the first failing command with its output.
func Cleanup() error {
	if pid, path := running(); pid != "" {
		return fmt.Errorf("kuberouter: a kube-router runs (pid %s, %s): stop it before Cleanup", pid, path)
	}
	// kube-router run by Args touches only IPv4's filter table; one run with --enable-ipv6
	// IPv6's too.
	if err := iptables.RemoveChains("filter", func(_, chain string) bool { return ownedChain.MatchString(chain) }); err != nil {
		return fmt.Errorf("kuberouter: %w", err)
	}
	return destroySets()
}

// running returns the process id and path of a kube-router running on the host, or "". It
// goes by the program's path, not its comm: the kernel cuts comm to 15 bytes, and Build's
// program is kube-router-<version>-...
func running() (pid, path string) {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		b, err := os.ReadFile(c)
		if err != nil {
			continue // gone since the glob
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if strings.HasPrefix(filepath.Base(argv0), "kube-router") {
			return filepath.Base(filepath.Dir(c)), argv0
		}
	}
	return "", ""
}

// destroySets destroys kube-router's ipsets, once no rule uses them.
func destroySets() error {
	out, err := run(nil, "ipset", "list", "-n")
	if err != nil {
		return err
	}
	for _, name := range strings.Fields(string(out)) {
		if !ownedSet.MatchString(name) {
			continue
		}
		if _, err := run(nil, "ipset", "destroy", name); err != nil {
			return err
		}
	}
	return nil
}

// run runs a command with stdin and returns its output; its error names the command and
// carries what it printed.
func run(stdin *strings.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kuberouter: %s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}
