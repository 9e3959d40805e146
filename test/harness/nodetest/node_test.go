//go:build node

package nodetest_test

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/nodetest"
)

// TestNode_PutsTheHostBack starts a node, runs a pod behind a Service and a NetworkPolicy (so
// that every program has made its rules, namespaces, mounts and cgroups), lets the node stop,
// and checks the host is as it was: the same iptables rules in every table of both families,
// ipsets, interfaces, network namespaces, mounts, cgroups, sysctls, and no process of the
// node's left running.
func TestNode_PutsTheHostBack(t *testing.T) {
	before := hostState(t)
	t.Run("node", func(t *testing.T) {
		node := nodetest.Start(t, nodetest.Options{})
		api := node.API
		api.CreateNamespace("probe")
		objs := `apiVersion: v1
kind: Pod
metadata: {name: pause, namespace: probe, labels: {app: pause}}
spec:
  containers:
    - {name: pause, image: ` + node.PauseImage() + `, imagePullPolicy: Never}
---
apiVersion: v1
kind: Service
metadata: {name: pause, namespace: probe}
spec:
  selector: {app: pause}
  ports: [{port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: probe}
spec:
  podSelector: {}
  policyTypes: [Ingress]
`
		if _, err := api.Apply([]byte(objs)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for !podRunning(t, node) {
			if time.Now().After(deadline) {
				t.Fatalf("the pod did not run within 3 minutes:\n%s", api.Get("/api/v1/namespaces/probe/pods/pause"))
			}
			time.Sleep(500 * time.Millisecond)
		}
		// kube-router has written the policy's chain for the pod: there is something to remove.
		for !strings.Contains(save(t, "iptables", "filter"), "KUBE-POD-FW-") {
			if time.Now().After(deadline) {
				t.Fatal("kube-router made no pod firewall chain within 3 minutes")
			}
			time.Sleep(500 * time.Millisecond)
		}
		during := hostState(t)
		if during.equal(before) {
			t.Fatal("the host looked the same with the node running: the comparison sees nothing")
		}
	})
	if after := hostState(t); !after.equal(before) {
		t.Fatalf("the host after the node is not as before:\n%s", before.diff(after))
	}
}

// podRunning reports whether the probe pod is Running.
func podRunning(t *testing.T, node *nodetest.Node) bool {
	t.Helper()
	status, body := node.API.Do(http.MethodGet, "/api/v1/namespaces/probe/pods/pause", nil)
	return status == http.StatusOK && strings.Contains(string(body), `"phase":"Running"`)
}

// state is what the node may change on the host, each part as sorted lines.
type state map[string][]string

func (s state) equal(o state) bool {
	for k, v := range s {
		if !slices.Equal(v, o[k]) {
			return false
		}
	}
	return len(s) == len(o)
}

// diff lists, per part, the lines only before (-) and only after (+).
func (s state) diff(after state) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s)) {
		for _, l := range s[k] {
			if !slices.Contains(after[k], l) {
				fmt.Fprintf(&b, "%s: - %s\n", k, l)
			}
		}
		for _, l := range after[k] {
			if !slices.Contains(s[k], l) {
				fmt.Fprintf(&b, "%s: + %s\n", k, l)
			}
		}
	}
	return b.String()
}

// counters are iptables-save's packet counts, which change with any traffic.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// save is iptables-save (or ip6tables-save) of one table, without counters and comments.
func save(t *testing.T, family, table string) string {
	t.Helper()
	out, err := exec.Command(family+"-save", "-t", table).Output()
	if err != nil {
		t.Fatalf("%s-save -t %s: %v", family, table, err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, counters.ReplaceAllString(l, ""))
	}
	return strings.Join(lines, "\n")
}

// hostState reads what the node may change.
func hostState(t *testing.T) state {
	t.Helper()
	s := state{}
	lines := func(text string) []string {
		var ls []string
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			if l != "" {
				ls = append(ls, l)
			}
		}
		slices.Sort(ls)
		return ls
	}
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			s[family+" "+table] = lines(save(t, family, table))
		}
	}
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		t.Fatalf("ipset list: %v", err)
	}
	s["ipsets"] = lines(string(out))
	links, _ := filepath.Glob("/sys/class/net/*")
	s["interfaces"] = lines(strings.Join(links, "\n"))
	netns, _ := filepath.Glob("/var/run/netns/*")
	s["network namespaces"] = lines(strings.Join(netns, "\n"))
	s["mounts"] = lines(mountPoints(t))
	var cgroups []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods*", "/sys/fs/cgroup/kubepods*"} {
		m, _ := filepath.Glob(pattern)
		cgroups = append(cgroups, m...)
	}
	s["cgroups"] = lines(strings.Join(cgroups, "\n"))
	var sysctls []string
	for _, k := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
		"net/ipv4/conf/all/route_localnet", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/netfilter/nf_conntrack_max"} {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil {
			sysctls = append(sysctls, k+"="+strings.TrimSpace(string(b)))
		}
	}
	s["sysctls"] = lines(strings.Join(sysctls, "\n"))
	s["processes"] = lines(nodeProcesses())
	state, _ := filepath.Glob("/run/terdut-nodetest/*")
	s["node state files"] = lines(strings.Join(state, "\n"))
	return s
}

// mountPoints lists the mount points.
func mountPoints(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			points = append(points, fields[4])
		}
	}
	return strings.Join(points, "\n")
}

// nodeProcesses lists the running programs a node starts, by their executable's name.
func nodeProcesses() string {
	var names []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		base := filepath.Base(exe)
		for _, prog := range []string{"kube-", "kubelet", "containerd", "etcd", "pause", "runc"} {
			if strings.HasPrefix(base, prog) {
				names = append(names, e.Name()+" "+base)
			}
		}
	}
	return strings.Join(names, "\n")
}
