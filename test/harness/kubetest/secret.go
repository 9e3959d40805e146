package kubetest

import (
	"encoding/json"
	"net/http"
)

// PutSecret creates or replaces the Opaque Secret ns/name so that it holds exactly data (a
// server-side apply as the admin, whose field manager owns every key), as an operator writes
// the Secret it keeps a credential in.
func (a *APIServer) PutSecret(ns, name string, data map[string][]byte) {
	a.tb.Helper()
	secret, err := json.Marshal(object("v1", "Secret", ns, name, map[string]any{"type": "Opaque", "data": data}))
	if err != nil {
		a.tb.Fatal(err)
	}
	// JSON is YAML: the apply patch is the object itself ([]byte values encode as base64,
	// as a Secret's data is written).
	a.MustDo(http.MethodPatch, "/api/v1/namespaces/"+ns+"/secrets/"+name+query("fieldManager", "terdut-kubetest", "force", "true"),
		applyPatch(secret), nil, http.StatusOK, http.StatusCreated)
}

// Secret returns the data of the Secret ns/name, decoded, and whether it exists.
func (a *APIServer) Secret(ns, name string) (map[string][]byte, bool) {
	a.tb.Helper()
	status, body := a.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/secrets/"+name, nil)
	if status == http.StatusNotFound {
		return nil, false
	}
	var s struct {
		Data map[string][]byte `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &s) != nil {
		a.tb.Fatalf("kubetest: GET secret %s/%s: got %d %s, want 200 or 404", ns, name, status, reason(body))
	}
	return s.Data, true
}

// DeleteSecret deletes the Secret ns/name, which must exist.
func (a *APIServer) DeleteSecret(ns, name string) {
	a.tb.Helper()
	a.MustDo(http.MethodDelete, "/api/v1/namespaces/"+ns+"/secrets/"+name, nil, nil, http.StatusOK)
}
