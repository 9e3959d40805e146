package kuberouter

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// families are the iptables commands of the two address families; kube-router run by Args
// touches only IPv4's, one run with --enable-ipv6 both.
var families = []struct{ save, restore string }{
	{"iptables-save", "iptables-restore"},
	{"ip6tables-save", "ip6tables-restore"},
}

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
	for _, f := range families {
		if err := cleanupFilter(f.save, f.restore); err != nil {
			return err
		}
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

// cleanupFilter removes the chains of one family in a single iptables-restore, which applies
// all of it or none.
func cleanupFilter(save, restore string) error {
	out, err := run(nil, save, "-t", "filter")
	if err != nil {
		return err
	}
	batch := removal(string(out))
	if batch == "" {
		return nil
	}
	_, err = run(strings.NewReader(batch), restore, "--noflush")
	return err
}

// removal returns the iptables-restore input that removes kube-router's chains from the
// filter table dumped in saved, or "" when it has none. Jumps from other chains go first,
// then every chain is flushed before any is deleted, since they jump to each other.
func removal(saved string) string {
	var chains, jumps []string
	for _, line := range strings.Split(saved, "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			name, _, _ = strings.Cut(name, " ")
			if ownedChain.MatchString(name) {
				chains = append(chains, name)
			}
			continue
		}
		rule, ok := strings.CutPrefix(line, "-A ")
		if !ok {
			continue
		}
		args := split(rule)
		if len(args) == 0 || ownedChain.MatchString(args[0]) {
			continue
		}
		if ownedChain.MatchString(target(args)) {
			jumps = append(jumps, "-D "+rule)
		}
	}
	if len(chains) == 0 && len(jumps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, j := range jumps {
		b.WriteString(j + "\n")
	}
	for _, c := range chains {
		b.WriteString("-F " + c + "\n")
	}
	for _, c := range chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// target returns the chain a rule jumps or goes to, or "".
func target(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-j" || args[i] == "-g" || args[i] == "--jump" || args[i] == "--goto" {
			return args[i+1]
		}
	}
	return ""
}

// split cuts an iptables-save rule into its arguments as iptables-restore reads them: a
// double-quoted argument (a comment) may hold spaces and \" .
func split(rule string) []string {
	var args []string
	var cur strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(rule); i++ {
		c := rule[i]
		switch {
		case quoted && c == '\\' && i+1 < len(rule):
			i++
			cur.WriteByte(rule[i])
		case c == '"':
			quoted, inArg = !quoted, true
		case c == ' ' && !quoted:
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
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
