package nodetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/nodetest/iptables"
)

// What the node changes on the host, and puts back: each change is recorded before it is
// made, and undone at the end in the reverse order (host.undo).

// sysctls are the host settings the node's programs write: the kubelet (vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops, vm.panic_on_oom, its keys limits), kube-proxy (the
// bridge's netfilter calls, forwarding) and the node itself. Their values are read before
// anything starts and written back at the end.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"net/ipv4/conf/all/route_localnet",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// host is the record of what the node changed on the host.
type host struct {
	bridge    string
	netnsAtUp []string          // /var/run/netns before the runtime started
	sysctlsAt map[string]string // each of sysctls as it was ("" for one the kernel lacks)
	cgroupsAt map[string]bool   // the directories directly under each cgroup hierarchy before
	// kubeletChainsAt are the kubelet's chains (kubeletChains) there before, as
	// family/table/chain: those are left alone.
	kubeletChainsAt map[string]bool
	undo            []func() error
}

// netnsDir is where the runtime (containerd's CRI) makes the pods' network namespaces.
const netnsDir = "/var/run/netns"

// newHost records the host's state before the node touches it.
func newHost(bridge string) (*host, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("nodetest: a node needs root (network namespaces, iptables, mounts, cgroups)")
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		return nil, fmt.Errorf("nodetest: the interface %s exists already: another node is running, or one was not cleaned up (ip link del %s)", bridge, bridge)
	}
	if b, err := os.ReadFile(stateFile); err == nil {
		return nil, fmt.Errorf("nodetest: a node before this one did not finish (killed before its cleanup?) and left %s, "+
			"the host's settings as they were before it:\n%s\nwrite each back to /proc/sys/<key>, remove what it left (the bridge %s, "+
			"cni-* network namespaces, kubepods cgroups, KUBE-* iptables chains, its processes), then remove the file",
			stateFile, b, bridge)
	}
	h := &host{bridge: bridge, sysctlsAt: map[string]string{}, cgroupsAt: map[string]bool{}}
	var record strings.Builder
	for _, k := range sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil {
			h.sysctlsAt[k] = strings.TrimSpace(string(b))
			fmt.Fprintf(&record, "%s=%s\n", k, h.sysctlsAt[k])
		}
	}
	h.netnsAtUp, _ = namespaces()
	h.kubeletChainsAt = kubeletChainsNow()
	for _, d := range cgroupDirs() {
		h.cgroupsAt[d] = true
		if strings.HasPrefix(filepath.Base(d), "kubepods") {
			return nil, fmt.Errorf("nodetest: the cgroup %s exists: a kubelet runs on this machine, or a node was not cleaned up", d)
		}
	}
	for _, ns := range h.netnsAtUp {
		if strings.HasPrefix(ns, "cni-") {
			return nil, fmt.Errorf("nodetest: the network namespace %s exists: a container runtime runs on this machine, or a node was not cleaned up", ns)
		}
	}
	// The settings as they were, for whoever must put them back after a run killed before
	// its cleanup; the cleanup removes the file last.
	if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stateFile, []byte(record.String()), 0o600); err != nil {
		return nil, err
	}
	h.undo = append(h.undo, func() error { return os.Remove(stateFile) })
	return h, nil
}

// stateFile holds the host's settings as they were while a node runs (see newHost).
const stateFile = "/run/terdut-nodetest/sysctls"

// setSysctl writes a host setting (recorded by newHost, restored by restoreSysctls).
func (h *host) setSysctl(key, value string) error {
	if _, ok := h.sysctlsAt[key]; !ok {
		return fmt.Errorf("nodetest: sysctl %s is not one the node records (or the kernel lacks it)", key)
	}
	return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
}

// restoreSysctls writes back every recorded setting that differs now.
func (h *host) restoreSysctls() error {
	var errs []error
	for _, k := range sysctls {
		was, ok := h.sysctlsAt[k]
		if !ok {
			continue
		}
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil && strings.TrimSpace(string(b)) == was {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(was), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, was, err))
		}
	}
	return errors.Join(errs...)
}

// addBridge makes the node's bridge with the gateway address cidr (such as 10.244.0.1/24):
// the pods' veths join it (the CNI bridge plugin takes it as it is), and the API server, the
// cluster's DNS and Postgres listen on its address, which the pods reach and, behind
// fenceBridge's rules, nothing outside the machine does.
func (h *host) addBridge(cidr string) error {
	if err := run("ip", "link", "add", "name", h.bridge, "type", "bridge"); err != nil {
		return err
	}
	h.undo = append(h.undo, func() error {
		if _, err := os.Stat("/sys/class/net/" + h.bridge); err != nil {
			return nil
		}
		return run("ip", "link", "del", h.bridge)
	})
	if err := run("ip", "addr", "add", cidr, "dev", h.bridge); err != nil {
		return err
	}
	return run("ip", "link", "set", h.bridge, "up")
}

// fenceBridge keeps the node's traffic on its bridge, in tagged rules removed at the end: the
// pods reach each other whatever the FORWARD chain's policy (a Docker engine run earlier
// leaves it at DROP); nothing from the bridge is forwarded to another interface (the host
// forwards, for kube-proxy, and a pod must not reach past it); and the bridge's address, where
// the API server, the kubelet, the DNS and Postgres listen, answers only the bridge and the
// host itself, not another interface's traffic.
func (h *host) fenceBridge(gateway string) error {
	tag := []string{"-m", "comment", "--comment", "terdut-server nodetest"}
	rules := [][]string{
		append([]string{"FORWARD", "-i", h.bridge, "-o", h.bridge}, append(tag, "-j", "ACCEPT")...),
		append([]string{"FORWARD", "-i", h.bridge, "!", "-o", h.bridge}, append(tag, "-j", "DROP")...),
		append([]string{"FORWARD", "!", "-i", h.bridge, "-o", h.bridge}, append(tag, "-j", "DROP")...),
		append([]string{"INPUT", "-d", gateway, "!", "-i", h.bridge, "-m", "addrtype", "!", "--src-type", "LOCAL"}, append(tag, "-j", "DROP")...),
	}
	for _, rule := range rules {
		if err := run("iptables", append([]string{"-w", "-I"}, rule...)...); err != nil {
			return err
		}
		h.undo = append(h.undo, func() error {
			var errs []error
			// Deleted as often as it is there: a rule added twice is removed twice.
			for range 10 {
				if run("iptables", append([]string{"-w", "-C"}, rule...)...) != nil {
					return errors.Join(errs...)
				}
				if err := run("iptables", append([]string{"-w", "-D"}, rule...)...); err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		})
	}
	return nil
}

// namespaces lists the named network namespaces.
func namespaces() ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

// removeNamespaces removes the network namespaces made since the node started (the pods',
// named cni-<id> by containerd), with their veths: a runtime stopped before it tore a pod
// down leaves them.
func (h *host) removeNamespaces() error {
	now, err := namespaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range now {
		if slices.Contains(h.netnsAtUp, ns) || !strings.HasPrefix(ns, "cni-") {
			continue
		}
		p := filepath.Join(netnsDir, ns)
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unmountUnder unmounts every mount point under dir, deepest first: the kubelet's volumes
// (tmpfs for Secrets and projected tokens), containerd's snapshots and its shims' rootfs.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 { // a mount may hide another on the same point
		points, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, p := range points {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	if points, _ := mountsUnder(dir); len(points) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %v", dir, points))
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points under dir, deepest (longest) first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(points), sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDirs lists the directories directly under each cgroup hierarchy (v1: one per
// controller) or the unified one.
func cgroupDirs() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		entries, err := os.ReadDir(r)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(r, e.Name()))
			}
		}
	}
	return dirs
}

// removeCgroups removes the cgroups the kubelet and runc made (kubepods and what is under
// it), deepest first, once nothing runs in them.
func (h *host) removeCgroups() error {
	var errs []error
	for _, d := range cgroupDirs() {
		if h.cgroupsAt[d] || !strings.HasPrefix(filepath.Base(d), "kubepods") {
			continue
		}
		var tree []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		slices.SortFunc(tree, func(a, b string) int { return len(b) - len(a) })
		// Whatever still runs in them (a container whose shim was killed) is killed first:
		// a cgroup with a process in it cannot be removed.
		for range 50 {
			alive := 0
			for _, p := range tree {
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						alive++
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if alive == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, p := range tree {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// forgetConntrack deletes the connection-tracking entries of the pods' and Services'
// addresses, so that no translation of the node's outlives it.
func forgetConntrack(cidrs ...string) error {
	if _, err := exec.LookPath("conntrack"); err != nil {
		return fmt.Errorf("nodetest: conntrack is missing (scripts/ensure-node.sh installs it): %w", err)
	}
	for _, c := range cidrs {
		for _, dir := range []string{"--orig-src", "--orig-dst"} {
			// conntrack -D exits 1 when nothing matched: that is no error here.
			cmd := exec.Command("conntrack", "-D", dir, c)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
				return fmt.Errorf("conntrack -D %s %s: %w: %s", dir, c, err, out)
			}
		}
	}
	return nil
}

// killProcesses kills, with SIGKILL, every process whose command line contains marker (the
// runtime's socket path: its shims carry it), and waits up to a few seconds for them to go.
func killProcesses(marker string) error {
	var left []int
	for range 50 {
		left = left[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(cmdline), marker) {
				continue
			}
			left = append(left, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes of %s still running after SIGKILL: %v", marker, left)
}

// run runs a command and returns its output in the error when it fails.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kubeletChains are the chains the kubelet makes for itself in every table it touches, in
// both families (kube-proxy --cleanup leaves them): a canary that tells it when the rules
// were flushed, a hint of the iptables mode, and a firewall that drops connections to
// 127.0.0.0/8 from other addresses, jumped to from INPUT and OUTPUT.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

var iptablesTables = []string{"filter", "nat", "mangle"}

// kubeletChainsNow lists which of kubeletChains exist, as family/table/chain.
func kubeletChainsNow() map[string]bool {
	have := map[string]bool{}
	for _, fam := range iptables.Families {
		for _, table := range iptablesTables {
			chains, _ := iptables.Chains(fam, table)
			for _, chain := range chains {
				if slices.Contains(kubeletChains, chain) {
					have[fam+"/"+table+"/"+chain] = true
				}
			}
		}
	}
	return have
}

// removeKubeletChains removes the kubelet's chains that were not there before the node
// started (host.kubeletChainsAt), and the rules that jump to them.
func (h *host) removeKubeletChains() error {
	for _, table := range iptablesTables {
		err := iptables.RemoveChains(table, func(fam, chain string) bool {
			return slices.Contains(kubeletChains, chain) && !h.kubeletChainsAt[fam+"/"+table+"/"+chain]
		})
		if err != nil {
			return err
		}
	}
	return nil
}
