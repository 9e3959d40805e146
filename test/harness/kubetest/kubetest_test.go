//go:build kube

package kubetest_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// TestKubeAPIServer: the API server answers as terdut-server meets it in a cluster: its
// discovery and keys are not for anonymous callers, discovery names the advertise address as
// jwks_uri, and the key set is refused to a request for application/json alone. Tokens come
// from the TokenRequest API with the audience and pod asked for.
func TestKubeAPIServer(t *testing.T) {
	a := kubetest.Start(t, kubetest.Options{})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.CA.Pool}}}
	get := func(path, accept string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, a.URL+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/.well-known/openid-configuration", "application/json"); got != http.StatusForbidden {
		t.Errorf("anonymous discovery: got %d, want 403", got)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(a.Get("/.well-known/openid-configuration"), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Issuer != a.LocalhostURL || doc.JWKSURI != a.URL+"/openid/v1/jwks" {
		t.Errorf("discovery: got issuer %s jwks_uri %s, want %s and %s/openid/v1/jwks", doc.Issuer, doc.JWKSURI, a.LocalhostURL, a.URL)
	}

	a.CreateNamespace("ops")
	a.CreateServiceAccount("ops", "op")
	a.CreatePod("ops", "op-0", "op")
	token := a.Token("ops", "op", kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "op-0"})
	if strings.Count(token, ".") != 2 {
		t.Fatalf("token: got %q, want a JWT", token)
	}
	status, _ := a.DoAs(token, http.MethodGet, "/openid/v1/jwks", nil)
	if status != http.StatusForbidden && status != http.StatusUnauthorized {
		t.Errorf("the key set with a token for another audience: got %d, want 401 or 403", status)
	}
	a.CreateServiceAccount("ops", "reader")
	a.Bind("ops", "reader", "system:service-account-issuer-discovery")
	reader := a.Token("ops", "reader", kubetest.TokenRequest{})
	for accept, want := range map[string]int{"application/json": http.StatusNotAcceptable, "application/jwk-set+json": http.StatusOK} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, a.URL+"/openid/v1/jwks", nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Authorization", "Bearer "+reader)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the key set for Accept %s: got %d, want %d", accept, resp.StatusCode, want)
		}
	}
}
