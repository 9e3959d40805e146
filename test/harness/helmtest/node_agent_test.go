//go:build node

package helmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/nodetest"
)

// agent is a pod running test/harness/nodetest/podagent: the test asks it, at its address on the
// node's bridge, to act from inside the cluster.
type agent struct {
	ns, addr string
	client   *http.Client
}

// startAgent runs podagent as the pod "agent" in ns and waits until it answers. With
// projected, it runs as the service account sa with a token for the audience terdut-server
// projected by the kubelet (600 s, the shortest the API server allows), as terdut-operator
// runs.
func startAgent(t *testing.T, node *nodetest.Node, image, ns, sa string, projected bool) *agent {
	t.Helper()
	spec := map[string]any{
		"automountServiceAccountToken": false,
		"securityContext":              map[string]any{"runAsNonRoot": true, "runAsUser": 65532},
	}
	container := map[string]any{
		"name": "agent", "image": image, "imagePullPolicy": "Never",
		"env": []any{
			map[string]any{"name": "TERDUT_URL", "value": peopleURL},
			map[string]any{"name": "TERDUT_OPERATOR_URL", "value": operatorURL},
			map[string]any{"name": "TOKEN_FILE", "value": "/var/run/secrets/terdut-server/token"},
		},
		"readinessProbe": map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": 8080}, "periodSeconds": 1},
	}
	if projected {
		spec["serviceAccountName"] = sa
		spec["volumes"] = []any{map[string]any{"name": "token", "projected": map[string]any{"sources": []any{
			map[string]any{"serviceAccountToken": map[string]any{"audience": "terdut-server", "expirationSeconds": 600, "path": "token"}}}}}}
		container["volumeMounts"] = []any{map[string]any{"name": "token", "mountPath": "/var/run/secrets/terdut-server", "readOnly": true}}
	}
	spec["containers"] = []any{container}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "agent", "namespace": ns}, "spec": spec}
	node.API.MustDo(http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", pod, nil, http.StatusCreated)
	a := &agent{ns: ns, client: &http.Client{Timeout: 40 * time.Second}}
	a.addr = waitPodIP(t, node.API, ns, "agent")
	return a
}

// waitPodIP waits until the pod ns/name is Ready and returns its address.
func waitPodIP(t *testing.T, api *kubetest.APIServer, ns, name string) string {
	t.Helper()
	deadline := time.Now().Add(podBound)
	var last string
	for time.Now().Before(deadline) {
		var p struct {
			Status struct {
				PodIP      string `json:"podIP"`
				Conditions []struct{ Type, Status string }
			} `json:"status"`
		}
		status, body := api.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+name, nil)
		if status == http.StatusOK && json.Unmarshal(body, &p) == nil {
			last = string(body)
			for _, c := range p.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" && p.Status.PodIP != "" {
					return p.Status.PodIP
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the pod %s/%s was not Ready within %s; last:\n%s", ns, name, podBound, last)
	return ""
}

// call sends one request to the agent and decodes its JSON answer into out.
func (a *agent) call(t *testing.T, method, path, body string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.addr+":8080"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("the agent in %s: %v", a.ns, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("the agent in %s answered %s: %v", a.ns, b, err)
		}
	}
	return resp.StatusCode, string(b)
}

// reconciled is what the operator's reconcile did.
type reconciled struct {
	Action     string
	Generation int64
	Key        string
	Error      string
}

// String shows what was done, never the key.
func (r reconciled) String() string {
	return fmt.Sprintf("action %q, generation %d, a key: %v", r.Action, r.Generation, r.Key != "")
}

// reconcile runs client.Reconcile in the agent with the key held (empty: none).
func (a *agent) reconcile(t *testing.T, held string) reconciled {
	t.Helper()
	var r reconciled
	if status, body := a.call(t, http.MethodPost, "/reconcile", held, &r); status != http.StatusOK {
		t.Fatalf("reconcile: %d %s", status, body)
	}
	if r.Error != "" {
		t.Fatalf("reconcile from %s: %s", a.ns, r.Error)
	}
	return r
}

// get makes the agent GET u with the API key (empty: none), and returns the status and body.
func (a *agent) get(t *testing.T, u, key string) (int, string) {
	t.Helper()
	var r struct {
		Status int
		Body   string
	}
	q := url.Values{"url": {u}}
	if key != "" {
		q.Set("bearer", key)
	}
	if status, body := a.call(t, http.MethodGet, "/get?"+q.Encode(), "", &r); status != http.StatusOK {
		t.Fatalf("GET %s from %s: %d %s", u, a.ns, status, body)
	}
	return r.Status, r.Body
}

// post makes the agent POST body (JSON) to u with the key (empty: none), and returns the
// status and body.
func (a *agent) post(t *testing.T, u, key, body string) (int, string) {
	t.Helper()
	var r struct {
		Status int
		Body   string
	}
	q := url.Values{"url": {u}}
	if key != "" {
		q.Set("bearer", key)
	}
	if status, answer := a.call(t, http.MethodPost, "/post?"+q.Encode(), body, &r); status != http.StatusOK {
		t.Fatalf("POST %s from %s: %d %s", u, a.ns, status, answer)
	}
	return r.Status, r.Body
}

// status is the claim's state as the operator's port says it.
func (a *agent) status(t *testing.T) string {
	t.Helper()
	code, body := a.get(t, operatorURL+"/api/bootstrap/status", "")
	var s struct{ State string }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("GET /api/bootstrap/status: %d %s", code, body)
	}
	return s.State
}

// dials reports whether the agent opens a TCP connection to addr.
func (a *agent) dials(t *testing.T, addr string) bool {
	t.Helper()
	status, _ := a.call(t, http.MethodGet, "/dial?addr="+url.QueryEscape(addr), "", nil)
	return status == http.StatusOK
}

// waitDial waits until the agent reaches addr (want) or no longer does (!want), then checks
// it three more times: a policy applied holds.
func (a *agent) waitDial(t *testing.T, addr string, want bool) {
	t.Helper()
	deadline := time.Now().Add(podBound)
	for a.dials(t, addr) != want {
		if time.Now().After(deadline) {
			t.Fatalf("from %s, %s reachable: still %v after %s, want %v", a.ns, addr, !want, podBound, want)
		}
		time.Sleep(time.Second)
	}
	for range 3 {
		if got := a.dials(t, addr); got != want {
			t.Fatalf("from %s, %s reachable: flipped to %v, want %v", a.ns, addr, got, want)
		}
	}
}

// projectedToken is what the agent says of its projected token.
type projectedToken struct {
	SHA256   string
	Iat, Exp int64
	Sub      string
}

func (a *agent) token(t *testing.T) projectedToken {
	t.Helper()
	var tok projectedToken
	if status, body := a.call(t, http.MethodGet, "/token", "", &tok); status != http.StatusOK || tok.SHA256 == "" {
		t.Fatalf("the agent's token: %d %s", status, body)
	}
	return tok
}

// waitRotation waits until the kubelet has written a new token into the agent's pod: at 80%
// of the 600 s life of the one before (and up to 10 s of its jitter), so at most a little
// over eight minutes after that one was issued.
func (a *agent) waitRotation(t *testing.T, before projectedToken) projectedToken {
	t.Helper()
	if before.Exp-before.Iat != 600 {
		t.Fatalf("the projected token lives %d s, want 600 (iat %d, exp %d)", before.Exp-before.Iat, before.Iat, before.Exp)
	}
	deadline := time.Unix(before.Iat, 0).Add(600 * time.Second)
	for {
		now := a.token(t)
		if now.SHA256 != before.SHA256 {
			if now.Iat <= before.Iat || now.Sub != before.Sub {
				t.Fatalf("the rotated token: iat %d (was %d), sub %q (was %q)", now.Iat, before.Iat, now.Sub, before.Sub)
			}
			return now
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not rotate the projected token before it expired (iat %d, exp %d)", before.Iat, before.Exp)
		}
		time.Sleep(5 * time.Second)
	}
}

// gateSeen is what watchGate saw.
type gateSeen struct {
	requests int
	bad      []string // answers other than 200, each once with its count
}

// watchGate asks, from the agent, GET /api/me with key through the Service over and over
// until the returned function is called, and then reports what it saw. During a rolling
// upgrade every answer must be 200: the key works on old and new replicas alike, and a
// replica leaving is taken out of the Service before it stops.
func watchGate(t *testing.T, a *agent, key string) func() gateSeen {
	t.Helper()
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var seen gateSeen
	counts := map[string]int{}
	halt := func() {
		once.Do(func() { close(stop) })
		wg.Wait()
	}
	t.Cleanup(halt) // a test that fails before it reads what was seen still stops asking
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			q := url.Values{"url": {peopleURL + "/api/me"}, "bearer": {key}}
			req, _ := http.NewRequest(http.MethodGet, "http://"+a.addr+":8080/get?"+q.Encode(), nil)
			resp, err := a.client.Do(req)
			seen.requests++
			if err != nil {
				counts["agent: "+err.Error()]++
				continue
			}
			var r struct {
				Status int
				Body   string
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
				counts[fmt.Sprintf("agent %d: %.200s", resp.StatusCode, b)]++
			} else if r.Status != http.StatusOK {
				counts[fmt.Sprintf("%d: %.200s", r.Status, r.Body)]++
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return func() gateSeen {
		halt()
		for k, n := range counts {
			seen.bad = append(seen.bad, fmt.Sprintf("%dx %s", n, k))
		}
		return seen
	}
}
