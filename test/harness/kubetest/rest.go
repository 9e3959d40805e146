package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// requestBound bounds one request to the API server.
const requestBound = 30 * time.Second

// do sends one request with token as its Bearer and returns the status and body; body is
// JSON-encoded unless it is an applyPatch (sent as it is).
func (a *APIServer) do(ctx context.Context, token, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case applyPatch:
		r, contentType = strings.NewReader(string(b)), "application/apply-patch+yaml"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		r, contentType = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, */*")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// Do sends a request as the cluster's admin and returns the status and body.
func (a *APIServer) Do(method, path string, body any) (int, []byte) {
	a.tb.Helper()
	return a.DoAs("", method, path, body)
}

// DoAs sends a request with token (empty: the admin's) and returns the status and body.
func (a *APIServer) DoAs(token, method, path string, body any) (int, []byte) {
	a.tb.Helper()
	if token == "" {
		token = a.admin
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestBound)
	defer cancel()
	status, out, err := a.do(ctx, token, method, path, body)
	if err != nil {
		a.tb.Fatalf("kubetest: %s %s: %v", method, path, err)
	}
	return status, out
}

// MustDo sends a request as the admin, fails the test unless the status is one of want,
// and decodes the body into out when out is not nil.
func (a *APIServer) MustDo(method, path string, body, out any, want ...int) {
	a.tb.Helper()
	status, b := a.Do(method, path, body)
	for _, w := range want {
		if status == w {
			if out != nil {
				if err := json.Unmarshal(b, out); err != nil {
					a.tb.Fatalf("kubetest: %s %s: decode: %v", method, path, err)
				}
			}
			return
		}
	}
	a.tb.Fatalf("kubetest: %s %s: got %d %s, want %v", method, path, status, b, want)
}

// Meta is the part of an object the tests need back.
type Meta struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
}

// CreateNamespace makes namespace ns; an existing one is kept. No controller runs beside this
// API server, so nothing makes the namespace's service account "default": create the accounts
// a test needs (test/harness/nodetest's controller manager does make it).
func (a *APIServer) CreateNamespace(ns string) {
	a.tb.Helper()
	a.MustDo(http.MethodPost, "/api/v1/namespaces", object("v1", "Namespace", "", ns, nil), nil, http.StatusCreated, http.StatusConflict)
}

// CreateServiceAccount makes the service account ns/name and returns its uid.
func (a *APIServer) CreateServiceAccount(ns, name string) string {
	a.tb.Helper()
	var m Meta
	a.MustDo(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts", object("v1", "ServiceAccount", ns, name, nil), &m, http.StatusCreated)
	return m.Metadata.UID
}

// DeleteServiceAccount deletes the service account ns/name.
func (a *APIServer) DeleteServiceAccount(ns, name string) {
	a.tb.Helper()
	a.MustDo(http.MethodDelete, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name, nil, nil, http.StatusOK)
}

// CreatePod makes a Pod object ns/name that runs as service account sa, and returns its uid.
// It stays Pending (no scheduler, no kubelet): it is there for tokens to be bound to.
func (a *APIServer) CreatePod(ns, name, sa string) string {
	a.tb.Helper()
	spec := map[string]any{"serviceAccountName": sa, "automountServiceAccountToken": false,
		"containers": []any{map[string]any{"name": "main", "image": "registry.invalid/terdut-test:0"}}}
	var m Meta
	a.MustDo(http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", object("v1", "Pod", ns, name, map[string]any{"spec": spec}), &m, http.StatusCreated)
	return m.Metadata.UID
}

// DeletePod deletes the Pod object ns/name at once (no kubelet would ever confirm it).
func (a *APIServer) DeletePod(ns, name string) {
	a.tb.Helper()
	a.MustDo(http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/"+name+"?gracePeriodSeconds=0", nil, nil, http.StatusOK)
}

// TokenRequest is what a kubelet asks for a projected service-account token.
type TokenRequest struct {
	Audiences []string // empty: the API server's own audiences, as for kube-api-access
	Seconds   int64    // zero: 3600
	Pod       string   // the Pod the token is bound to (name; its uid is looked up); empty: unbound
}

// Token returns a token of service account ns/sa from the TokenRequest API, as a kubelet asks
// for a pod's projected token.
func (a *APIServer) Token(ns, sa string, req TokenRequest) string {
	a.tb.Helper()
	if req.Seconds == 0 {
		req.Seconds = 3600
	}
	spec := map[string]any{"expirationSeconds": req.Seconds}
	if len(req.Audiences) > 0 {
		spec["audiences"] = req.Audiences
	}
	if req.Pod != "" {
		var pod Meta
		a.MustDo(http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+req.Pod, nil, &pod, http.StatusOK)
		spec["boundObjectRef"] = map[string]any{"apiVersion": "v1", "kind": "Pod", "name": req.Pod, "uid": pod.Metadata.UID}
	}
	var out struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	a.MustDo(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+sa+"/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}, &out, http.StatusCreated)
	return out.Status.Token
}

// Bind grants service account ns/sa the cluster role role, cluster-wide.
func (a *APIServer) Bind(ns, sa, role string) {
	a.tb.Helper()
	name := "kubetest:" + ns + ":" + sa + ":" + role
	a.MustDo(http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", name, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "namespace": ns, "name": sa}},
	}), nil, http.StatusCreated, http.StatusConflict)
}

// Get reads path as the admin (an absolute path of the API, such as /openid/v1/jwks) and
// fails the test unless it answers 200.
func (a *APIServer) Get(path string) []byte {
	a.tb.Helper()
	status, b := a.Do(http.MethodGet, path, nil)
	if status != http.StatusOK {
		a.tb.Fatalf("kubetest: GET %s: got %d %s, want 200", path, status, b)
	}
	return b
}

// object is a Kubernetes object of kind with its metadata, and the fields of rest.
func object(apiVersion, kind, ns, name string, rest map[string]any) map[string]any {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md}
	for k, v := range rest {
		o[k] = v
	}
	return o
}

// query escapes a query's values.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return "?" + q.Encode()
}
