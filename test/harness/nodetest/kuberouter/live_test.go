//go:build node

package kuberouter

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// syncBound bounds how long kube-router may take to write a policy's chains and ipsets: a
// hang, not its speed (a few seconds on a quiet machine).
const syncBound = 2 * time.Minute

// hostState is what kube-router could change on the host: both families' filter tables (as
// `iptables -S` prints them, without counters) and the names of the ipsets.
func hostState(tb testing.TB) []string {
	tb.Helper()
	var s []string
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, line := range strings.Split(strings.TrimSpace(mustRun(tb, ipt, "-t", "filter", "-S")), "\n") {
			s = append(s, ipt+": "+line)
		}
	}
	for _, name := range sets(tb) {
		s = append(s, "ipset: "+name)
	}
	slices.Sort(s)
	return s
}

// setStatus replaces the status of the object at path, as a kubelet would (no kubelet runs).
func setStatus(tb testing.TB, a *kubetest.APIServer, path string, status map[string]any) {
	tb.Helper()
	var obj map[string]any
	a.MustDo(http.MethodGet, path, nil, &obj, http.StatusOK)
	obj["status"] = status
	a.MustDo(http.MethodPut, path+"/status", obj, nil, http.StatusOK)
}

const policyManifest = `apiVersion: v1
kind: Node
metadata:
  name: kr-node
spec:
  podCIDR: 10.250.0.0/24
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kr, labels: {app: web}}
spec:
  nodeName: kr-node
  containers: [{name: main, image: registry.invalid/terdut-test:0}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: kr, labels: {app: client}}
spec:
  nodeName: kr-node
  containers: [{name: main, image: registry.invalid/terdut-test:0}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: kr}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress, Egress]
  ingress:
    - from: [{podSelector: {matchLabels: {app: client}}}]
      ports: [{protocol: TCP, port: 8080}]
  egress:
    - to: [{ipBlock: {cidr: 10.250.0.0/24}}]
`

// TestCleanup_AfterKubeRouter runs the real kube-router with Args against a real API server
// holding a node, two pods on it and a NetworkPolicy, waits until it has written the policy's
// chains and ipsets, stops it, and checks that Cleanup puts the filter tables and ipsets back
// exactly as they were. Nothing is sent to the pods' addresses: they exist only in the API.
func TestCleanup_AfterKubeRouter(t *testing.T) {
	mustHost(t)
	if err := Cleanup(); err != nil {
		t.Fatalf("Cleanup before the test: %v", err)
	}
	before := hostState(t)
	bin, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	a := kubetest.Start(t, kubetest.Options{})
	a.CreateNamespace("kr")
	a.CreateServiceAccount("kr", "default") // pod admission wants it; no controller makes it here
	if _, err := a.Apply([]byte(policyManifest)); err != nil {
		t.Fatal(err)
	}
	setStatus(t, a, "/api/v1/nodes/kr-node", map[string]any{
		"addresses": []any{map[string]any{"type": "InternalIP", "address": "10.250.0.1"}}})
	for pod, ip := range map[string]string{"web": "10.250.0.5", "client": "10.250.0.6"} {
		setStatus(t, a, "/api/v1/namespaces/kr/pods/"+pod, map[string]any{"phase": "Running",
			"hostIP": "10.250.0.1", "podIP": ip, "podIPs": []any{map[string]any{"ip": ip}}})
	}

	// Registered before kube-router starts, so that it runs after kube-router has stopped.
	t.Cleanup(func() {
		if err := Cleanup(); err != nil {
			t.Errorf("Cleanup at the end: %v", err)
		}
	})
	// kube-router takes its node from NODE_NAME before --hostname-override.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "NODE_NAME=") })
	p, err := proctest.Start("kube-router", bin, Args(a.Kubeconfig(), "kr-node", 0), env,
		filepath.Join(t.TempDir(), "kube-router.log"), proctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(syscall.SIGTERM, 30*time.Second) })

	made := func() []string {
		var m []string
		for _, line := range hostState(t) {
			if !slices.Contains(before, line) {
				m = append(m, line)
			}
		}
		return m
	}
	written := func(m []string) bool {
		var chain, src, dst bool
		for _, line := range m {
			chain = chain || strings.Contains(line, "-N KUBE-POD-FW-")
			src = src || strings.HasPrefix(line, "ipset: KUBE-SRC-")
			dst = dst || strings.HasPrefix(line, "ipset: KUBE-DST-")
		}
		return chain && src && dst
	}
	deadline := time.Now().Add(syncBound)
	for !written(made()) {
		if p.Done() {
			t.Fatalf("kube-router exited before writing the policy:\n%s", p.Log())
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-router wrote no pod chain and ipsets in %v; it made %q\n%s", syncBound, made(), p.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !p.Stop(syscall.SIGTERM, 30*time.Second) {
		t.Errorf("kube-router did not stop on SIGTERM:\n%s", p.Log())
	}
	m := made()
	t.Logf("kube-router left:\n%s", strings.Join(m, "\n"))

	if err := Cleanup(); err != nil {
		t.Fatal(err)
	}
	if after := hostState(t); !slices.Equal(after, before) {
		j, _ := json.MarshalIndent(map[string][]string{"before": before, "after": after}, "", "  ")
		t.Errorf("after Cleanup the host differs from before kube-router:\n%s", j)
	}
}
