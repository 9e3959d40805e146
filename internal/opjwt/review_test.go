package opjwt_test

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// TestVerify_ReviewAudiences: the token review asks the API server about terdut-server's
// audience, and the token is accepted only when the answer names that audience. A real
// kube-apiserver always names the audiences it checked (TestKube_TokenReview, -tags kube);
// an answer with none, which an API server that ignores spec.audiences would give, cannot be
// had from it, so an imitation answers here: such an answer confirms no audience, and the
// token is refused, not accepted.
func TestVerify_ReviewAudiences(t *testing.T) {
	for _, tc := range []struct {
		name      string
		audiences []string // in the answer; nil: the field is absent
		accepted  bool
	}{
		{"OKOurs", []string{audience}, true},
		{"OKOursAmongOthers", []string{"https://kubernetes.default.svc", audience}, true},
		{"ErrAbsent", nil, false},
		{"ErrEmpty", []string{}, false},
		{"ErrOthers", []string{"https://kubernetes.default.svc"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var review struct {
					Spec struct{ Audiences []string } `json:"spec"`
				}
				if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || json.NewDecoder(r.Body).Decode(&review) != nil {
					http.Error(w, "not a token review", http.StatusBadRequest)
					return
				}
				asked = review.Spec.Audiences
				status := map[string]any{"authenticated": true, "user": map[string]any{"username": subject}}
				if tc.audiences != nil {
					status["audiences"] = tc.audiences
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})
			}))
			t.Cleanup(api.Close)
			dir := t.TempDir()
			ca, token := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(token, []byte("this-servers-own-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			is := satest.New(t, satest.Options{})
			v := mustVerifier(t, is, func(c *opjwt.Config) {
				c.Review = &opjwt.ReviewConfig{URL: api.URL, CAFile: ca, TokenFile: token}
			})
			_, err := v.Verify(t.Context(), is.Sign(t, operatorClaims()))
			if len(asked) != 1 || asked[0] != audience {
				t.Fatalf("the review asked about audiences %q, want [%s]", asked, audience)
			}
			var refused *opjwt.RefusedError
			switch {
			case tc.accepted && err != nil:
				t.Fatalf("answer's audiences %q: got %v, want accepted", tc.audiences, err)
			case !tc.accepted && (!errors.As(err, &refused) || refused.Reason != opjwt.ReasonRevoked):
				t.Fatalf("answer's audiences %q: got %v, want refused for %s", tc.audiences, err, opjwt.ReasonRevoked)
			}
		})
	}
}
