// Package iptables removes chains a program left in the host's iptables and ip6tables, with
// the rules of other chains that jump to them: each table of each family in a single
// iptables-restore, which applies all of it or none. test/harness/nodetest removes the kubelet's
// chains with it, and test/harness/nodetest/kuberouter kube-router's.
package iptables

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Families are the commands of the two address families: iptables and ip6tables.
var Families = []string{"iptables", "ip6tables"}

// RemoveChains removes from table, in both families, every chain for which owned(family,
// chain) is true: first the rules of other chains that jump or go to one of them, then their
// rules, then the chains. It leaves every other chain and rule as it is, and succeeds when
// there is nothing to remove (or no such table). It returns the first failing command with
// its output.
func RemoveChains(table string, owned func(family, chain string) bool) error {
	for _, fam := range Families {
		saved, err := save(fam, table)
		if err != nil {
			return err
		}
		batch := Removal(saved, table, func(chain string) bool { return owned(fam, chain) })
		if batch == "" {
			continue
		}
		if _, err := run(strings.NewReader(batch), fam+"-restore", "--noflush"); err != nil {
			return err
		}
	}
	return nil
}

// Chains lists the chains of table in family (iptables or ip6tables), built-in ones included;
// none when the kernel has no such table.
func Chains(family, table string) ([]string, error) {
	saved, err := save(family, table)
	if err != nil {
		return nil, err
	}
	var chains []string
	for _, line := range strings.Split(saved, "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			name, _, _ = strings.Cut(name, " ")
			chains = append(chains, name)
		}
	}
	return chains, nil
}

// save is <family>-save of table, or "" when the kernel has no such table.
func save(family, table string) (string, error) {
	out, err := run(nil, family+"-save", "-t", table)
	if err != nil {
		if bytes.Contains(out, []byte("does not exist")) {
			return "", nil
		}
		return "", err
	}
	return string(out), nil
}

// Removal returns the iptables-restore input that removes the owned chains from table as
// dumped in saved, or "" when it has none. Jumps from other chains go first, then every chain
// is flushed before any is deleted, since they may jump to each other.
func Removal(saved, table string, owned func(chain string) bool) string {
	var chains, jumps []string
	for _, line := range strings.Split(saved, "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			name, _, _ = strings.Cut(name, " ")
			if owned(name) {
				chains = append(chains, name)
			}
			continue
		}
		rule, ok := strings.CutPrefix(line, "-A ")
		if !ok {
			continue
		}
		args := split(rule)
		if len(args) == 0 || owned(args[0]) {
			continue
		}
		if t := target(args); t != "" && owned(t) {
			jumps = append(jumps, "-D "+rule)
		}
	}
	if len(chains) == 0 && len(jumps) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*" + table + "\n")
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

// run runs a command with stdin and returns its output; its error names the command and
// carries what it printed.
func run(stdin *strings.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}
