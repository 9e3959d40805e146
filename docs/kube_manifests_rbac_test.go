//go:build kube

package docs

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// TestKube_ManifestsRBAC applies the service-account-identity directory to a real API server
// and asks it (access reviews, and the rules a real token holds) what terdut-server's account
// and the operator's may do: the server exactly what its flags need, the operator nothing in
// the server's namespace.
func TestKube_ManifestsRBAC(t *testing.T) {
	a, _ := mustApplyDir(t, mustManifestTree(t)[identityDir])
	const ns, sa = "terdut", "terdut-server"
	const opNS, opSA = "terdut-operator-system", "terdut-operator"
	// The operator's account is made by terdut-operator's own manifests, never by these.
	a.CreateServiceAccount(opNS, opSA)

	t.Run("ServerCan", func(t *testing.T) {
		for _, x := range kubeServerGrants {
			if !a.Allowed(ns, sa, x) {
				t.Errorf("%s: got denied, want allowed", x)
			}
		}
	})

	t.Run("ServerCannot", func(t *testing.T) {
		// What an attacker holding the server's token would want.
		for _, x := range []kubetest.Access{
			{Verb: "get", Resource: "secrets", Namespace: ns},
			{Verb: "get", Resource: "secrets", Namespace: ns, Name: "terdut-server-database"},
			{Verb: "list", Resource: "secrets", Namespace: ns},
			{Verb: "watch", Resource: "secrets", Namespace: ns},
			{Verb: "get", Resource: "secrets", Namespace: opNS},
			{Verb: "list", Resource: "secrets", Namespace: opNS},
			{Verb: "list", Resource: "secrets"},
			{Verb: "get", Resource: "configmaps", Namespace: ns},
			{Verb: "list", Resource: "configmaps", Namespace: opNS},
			{Verb: "list", Resource: "pods", Namespace: ns},
			{Verb: "list", Resource: "pods"},
			{Verb: "create", Resource: "pods", Namespace: ns},
			{Verb: "create", Resource: "pods", Namespace: opNS},
			{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: ns},
			{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: opNS, Name: opSA},
			{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: ns, Name: sa},
			{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
			{Verb: "update", Group: "apps", Resource: "deployments", Namespace: ns},
			{Verb: "patch", Group: "apps", Resource: "deployments", Namespace: opNS},
			{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
			{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: ns},
			{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			{Verb: "impersonate", Resource: "serviceaccounts", Namespace: opNS, Name: opSA},
			{Verb: "impersonate", Resource: "users"},
			{Verb: "create", Group: "certificates.k8s.io", Resource: "certificatesigningrequests"},
			{Verb: "delete", Resource: "namespaces", Name: ns},
			{Verb: "get", Resource: "nodes", Subresource: "proxy"},
		} {
			if a.Allowed(ns, sa, x) {
				t.Errorf("%s: got allowed, want denied", x)
			}
		}
	})

	t.Run("ServerNothingElse", func(t *testing.T) {
		// A token as the kubelet gives the server's pod (the projected volume of
		// the Deployment: no audience, so the API server's own).
		a.CreatePod(ns, "terdut-server-0", sa)
		token := a.Token(ns, sa, kubetest.TokenRequest{Pod: "terdut-server-0"})
		var grants []string
		for _, x := range kubeServerGrants {
			grants = append(grants, accessKey(x))
		}
		mustOnlyRules(t, "system:serviceaccount:terdut:terdut-server in terdut", a.RulesOf(token, ns),
			slices.Concat(kubeDefaultRules, grants), grants)
	})

	t.Run("ServerTokenReview", func(t *testing.T) {
		// What --operator-oidc-token-review-url does with the server's token: ask about the
		// operator's token for terdut-server. Refused once the operator's pod is gone.
		a.CreatePod(ns, "terdut-server-1", sa)
		server := a.Token(ns, sa, kubetest.TokenRequest{Pod: "terdut-server-1"})
		a.CreatePod(opNS, "terdut-operator-1", opSA)
		operator := a.Token(opNS, opSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "terdut-operator-1"})
		review := func(operator string) (bool, string) {
			t.Helper()
			status, body := a.DoAs(server, http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", map[string]any{
				"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
				"spec": map[string]any{"token": operator, "audiences": []string{"terdut-server"}}})
			var out struct {
				Status struct {
					Authenticated bool `json:"authenticated"`
					User          struct {
						Username string `json:"username"`
					} `json:"user"`
				} `json:"status"`
			}
			if status != http.StatusCreated || json.Unmarshal(body, &out) != nil {
				t.Fatalf("TokenReview with the server's token: got %d %s, want 201", status, body)
			}
			return out.Status.Authenticated, out.Status.User.Username
		}
		if ok, user := review(operator); !ok || user != "system:serviceaccount:"+opNS+":"+opSA {
			t.Errorf("the operator's token: got authenticated %v as %q, want true as the operator", ok, user)
		}
		// Tokens never reviewed, of pods deleted with the operator's. The API server reads pods
		// through its own watch, which a busy machine can leave a moment behind a deletion: a
		// token reviewed in that moment is accepted (and then remembered), so each try is a
		// token of its own. Once one is refused, every later one is.
		var unseen []string
		for i := range 5 {
			pod := fmt.Sprintf("terdut-operator-%d", i+2)
			a.CreatePod(opNS, pod, opSA)
			unseen = append(unseen, a.Token(opNS, opSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: pod}))
		}
		a.DeletePod(opNS, "terdut-operator-1")
		for i := range unseen {
			a.DeletePod(opNS, fmt.Sprintf("terdut-operator-%d", i+2))
		}
		refused := -1
		for i, token := range unseen {
			if ok, _ := review(token); !ok {
				if refused < 0 {
					refused = i
				}
			} else if refused >= 0 {
				t.Errorf("a token of a deleted pod, never reviewed before: refused at try %d, accepted at try %d", refused+1, i+1)
			}
			if refused < 0 {
				time.Sleep(250 * time.Millisecond)
			}
		}
		switch {
		case refused < 0:
			t.Errorf("tokens of deleted pods, never reviewed before: all %d accepted over a second, want refused", len(unseen))
		case refused > 0:
			t.Logf("tokens of deleted pods, never reviewed before: %d accepted before the API server saw the deletion", refused)
		}
		// A token it accepted before, the API server remembers for 10 seconds
		// (kube-apiserver's cache of successful authentications): what docs/kubernetes.md says.
		start := time.Now()
		for ok, _ := review(operator); ok; ok, _ = review(operator) {
			if time.Since(start) > 20*time.Second {
				t.Fatalf("the operator's token after its pod was deleted: still authenticated after %s, want refused within 10 seconds", time.Since(start))
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Logf("the operator's token, reviewed before, refused %s after its pod was deleted", time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("OperatorNothingInServerNamespace", func(t *testing.T) {
		a.CreatePod(opNS, "terdut-operator-0", opSA)
		// Its token for terdut-server (docs/install.md's snippet) is worth nothing to the API server.
		forServer := a.Token(opNS, opSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "terdut-operator-0"})
		if status, body := a.DoAs(forServer, http.MethodGet, "/api", nil); status != http.StatusUnauthorized {
			t.Errorf("the operator's token for terdut-server at the API server: got %d %s, want 401", status, body)
		}
		token := a.Token(opNS, opSA, kubetest.TokenRequest{Pod: "terdut-operator-0"})
		mustOnlyRules(t, "system:serviceaccount:terdut-operator-system:terdut-operator in terdut", a.RulesOf(token, ns), kubeDefaultRules, nil)
	})

	t.Run("IssuerDiscoveryWithoutTheDefaultBinding", func(t *testing.T) {
		// A cluster without the bootstrap binding of system:service-account-issuer-discovery
		// to every service account: the chart's own binding still lets the server
		// read the keys. Last, since it changes the cluster.
		a.MustDo(http.MethodDelete, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:service-account-issuer-discovery", nil, nil, http.StatusOK)
		jwks := kubetest.Access{Verb: "get", Path: "/openid/v1/jwks"}
		start := time.Now()
		for a.Allowed(opNS, opSA, jwks) { // the authorizer's cache sees the deletion soon
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s for the operator: still allowed 10 seconds after the default binding was deleted", jwks)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, x := range kubeServerGrants {
			if x.Path != "" && !a.Allowed(ns, sa, x) {
				t.Errorf("%s without the default binding: got denied, want allowed", x)
			}
		}
	})
}
