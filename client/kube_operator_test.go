//go:build kube

package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// The names terdut-operator runs under, as deploy/kubernetes/service-account-identity names them.
const (
	kubeServerNS     = "terdut"
	kubeServerSA     = "terdut-server"
	kubeOperatorNS   = "terdut-operator-system"
	kubeOperatorSA   = "terdut-operator"
	kubeOperatorPod  = "terdut-operator-0"
	kubeAudience     = "terdut-server"
	kubeSecret       = "terdut-server-bootstrap"
	kubeSecretKey    = "api-key"
	kubeOperatorSubj = "system:serviceaccount:" + kubeOperatorNS + ":" + kubeOperatorSA
)

// kubeOperator plays terdut-operator's bootstrap step as it runs in a cluster: the claim's
// key lives in a Secret of the real API server, read before each reconcile and written the
// moment Reconcile hands back a new one.
type kubeOperator struct {
	api    *kubetest.APIServer
	client *client.Client
	sent   *bearerLog
}

// heldKey is the key the operator's Secret holds, or "" when there is no Secret (or no key in it).
func (o *kubeOperator) heldKey(t *testing.T) string {
	t.Helper()
	data, ok := o.api.Secret(kubeOperatorNS, kubeSecret)
	if !ok {
		return ""
	}
	return string(data[kubeSecretKey])
}

// reconcile runs one reconcile as the operator does: read the Secret, call Reconcile, store
// a new key in the Secret before anything else; then it checks the action and generation.
func (o *kubeOperator) reconcile(t *testing.T, want client.Action, wantGen int64) client.ReconcileResult {
	t.Helper()
	res, err := o.client.Reconcile(t.Context(), o.heldKey(t))
	if err != nil {
		t.Fatalf("reconcile: got %v, want %s", err, want)
	}
	if res.Action != client.ActionNone {
		o.api.PutSecret(kubeOperatorNS, kubeSecret, map[string][]byte{kubeSecretKey: []byte(res.APIKey.Key)})
	}
	if res.Action != want || res.Generation != wantGen {
		t.Fatalf("reconcile: got %s at generation %d, want %s at %d", res.Action, res.Generation, want, wantGen)
	}
	if got := o.heldKey(t); (want == client.ActionNone) != (res.APIKey.Key == "") || (res.APIKey.Key != "" && got != res.APIKey.Key) {
		t.Fatalf("reconcile %s: the Secret does not hold the key Reconcile returned", want)
	}
	t.Logf("reconcile: %s at generation %d (revoked %d)", res.Action, res.Generation, res.RevokedAPIKeys)
	return res
}

// bearerLog is a transport that notes a fingerprint of the Bearer token of every operator
// request (the claim and the reset), so that a test can tell which token file content was
// sent without keeping or printing a token.
type bearerLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	sent []string
}

func (b *bearerLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/bootstrap") {
		b.mu.Lock()
		b.sent = append(b.sent, r.URL.Path+" "+fingerprint(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
		b.mu.Unlock()
	}
	return b.next.RoundTrip(r)
}

// since returns what was sent from the n-th operator request on.
func (b *bearerLog) since(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sent[n:]...)
}

// count is how many operator requests were sent.
func (b *bearerLog) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sent)
}

// fingerprint names a token without showing it.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:6])
}
