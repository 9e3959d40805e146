package api_test

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

const (
	opAudience  = "terdut-server"
	opNamespace = "terdut-operator-system"
	opAccount   = "terdut-operator"
)

func opClaims(pod string) satest.Claims {
	return satest.ServiceAccount(opNamespace, opAccount, pod, opAudience)
}

// identityServer starts an instance that knows the operator only by its service-account
// tokens from is (and also by the operator token when withToken).
func identityServer(t *testing.T, is *satest.Issuer, withToken bool) *apitest.Server {
	t.Helper()
	v, err := opjwt.New(opjwt.Config{Issuer: is.URL(), Audience: opAudience,
		Subjects: []string{satest.SubjectOf(opNamespace, opAccount)}, MinRefresh: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	return apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.OperatorIdentity = v
		if !withToken {
			o.OperatorTokens = nil
		}
	})
}

// lastAudit returns the newest audit row.
func lastAudit(t *testing.T, st *store.Store) store.AuditEntry {
	t.Helper()
	entries, err := st.BootstrapAudit(t.Context())
	if err != nil || len(entries) == 0 {
		t.Fatalf("audit: got %d rows, %v, want some", len(entries), err)
	}
	return entries[len(entries)-1]
}

// badOperatorTokens are the tokens that must not prove the operator, each with what is wrong.
func badOperatorTokens(t *testing.T, is, other *satest.Issuer) map[string]string {
	t.Helper()
	now := time.Now().Truncate(time.Second)
	with := func(f func(*satest.Claims)) satest.Claims {
		c := opClaims("terdut-operator-0")
		f(&c)
		return c
	}
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, kid := is.PublicKeyPEM(t)
	return map[string]string{
		"WrongAudience": is.Sign(t, with(func(c *satest.Claims) { c.Audience = []string{"https://kubernetes.default.svc"} })),
		"WrongSubject":  is.Sign(t, with(func(c *satest.Claims) { c.ServiceAccount = "default" })),
		"WrongIssuer":   is.Sign(t, with(func(c *satest.Claims) { c.Issuer = "https://kubernetes.default.svc.cluster.local" })),
		"Expired": is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now.Add(-time.Hour), now.Add(-time.Hour), now.Add(-2*time.Minute)
		})),
		"NotYetValid": is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now, now.Add(2*time.Minute), now.Add(time.Hour)
		})),
		"LifetimeOver24h":    is.Sign(t, with(func(c *satest.Claims) { c.Expiry = c.IssuedAt.Add(24*time.Hour + time.Second) })),
		"UnknownKey":         satest.SignWith(t, jose.RS256, stranger, "not-published", is.Payload(opClaims("terdut-operator-0"))),
		"AlgNone":            satest.Unsigned(t, kid, is.Payload(opClaims("terdut-operator-0"))),
		"HS256WithPublicKey": satest.SignWith(t, jose.HS256, pub, kid, is.Payload(opClaims("terdut-operator-0"))),
		"SecondIssuer":       other.Sign(t, opClaims("terdut-operator-0")),
		"NoToken":            "",
		"APIKeyShaped":       strings.Repeat("ab", 32),
	}
}

// TestOperatorIdentity is an install that knows its operator only by its service-account
// token: each bad token is refused with 401 and changes nothing, whether it tries to claim
// or to reset; RS256 and ES256 tokens claim and reset, also after the issuer rotates its
// key; the audit says who did; no token reaches the logs or the metrics.
func TestOperatorIdentity(t *testing.T) {
	is, other := satest.New(t, satest.Options{}), satest.New(t, satest.Options{})
	srv := identityServer(t, is, false)
	bad := badOperatorTokens(t, is, other)
	refused := func(t *testing.T, path string, want statusBody) {
		t.Helper()
		for name, token := range bad {
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: path, Bearer: token})
			if resp.Status != http.StatusUnauthorized || resp.Code() != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s with %s: got %d %s, want 401 unauthorized", path, name, resp.Status, resp.Body)
			}
			if got := mustStatus(t, srv); got != want {
				t.Fatalf("after %s with %s: got %+v, want %+v (nothing changed)", path, name, got, want)
			}
		}
	}

	t.Run("ClaimRefused", func(t *testing.T) {
		refused(t, "/api/bootstrap", statusBody{"pending", 0})
		if n := count(t, srv, `SELECT count(*) FROM users`) + count(t, srv, `SELECT count(*) FROM api_keys`); n != 0 {
			t.Fatalf("users and keys after refused claims: got %d, want 0", n)
		}
	})
	var key string
	t.Run("ClaimRS256", func(t *testing.T) {
		resp := claim(t, srv, is.Sign(t, opClaims("terdut-operator-7d9f8-abcde")))
		if resp.Status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", resp.Status, resp.Body)
		}
		var body struct {
			APIKey struct{ Key string } `json:"api_key"`
		}
		resp.JSON(t, &body)
		key = body.APIKey.Key
		a := lastAudit(t, srv.Store)
		if a.Action != "claim" || a.Method != store.AuthServiceAccount || a.Subject != satest.SubjectOf(opNamespace, opAccount) ||
			a.Pod != "terdut-operator-7d9f8-abcde" {
			t.Fatalf("audit: got %+v, want a claim by service_account %s in pod terdut-operator-7d9f8-abcde", a, satest.SubjectOf(opNamespace, opAccount))
		}
	})
	t.Run("ResetRefused", func(t *testing.T) {
		refused(t, "/api/bootstrap/reset", statusBody{"complete", 1})
		if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key}).Status; got != http.StatusOK {
			t.Fatalf("the principal's key after refused resets: got %d, want 200", got)
		}
	})
	t.Run("ResetES256", func(t *testing.T) {
		c := opClaims("")
		resp := reset(t, srv, apitest.Request{Bearer: is.SignES256(t, c)})
		if resp.Status != http.StatusOK {
			t.Fatalf("got %d %s, want 200", resp.Status, resp.Body)
		}
		if a := lastAudit(t, srv.Store); a.Action != "reset" || a.Method != store.AuthServiceAccount || a.Pod != "" {
			t.Fatalf("audit: got %+v, want a reset by service_account without a pod", a)
		}
	})
	t.Run("ClaimAfterKeyRotation", func(t *testing.T) {
		is.RotateRSA(t)
		if resp := claim(t, srv, is.Sign(t, opClaims("terdut-operator-0"))); resp.Status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", resp.Status, resp.Body)
		}
		if got := mustStatus(t, srv); got != (statusBody{"complete", 2}) {
			t.Fatalf("got %+v, want complete at generation 2", got)
		}
	})
	t.Run("NoSecretInLogsOrMetrics", func(t *testing.T) {
		metrics := string(srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
		for name, token := range bad {
			if token == "" {
				continue
			}
			// The signature part is what nobody but the holder can make; the claims may be logged.
			sig := token[strings.LastIndex(token, ".")+1:]
			if len(sig) > 16 && (strings.Contains(srv.Logs.String(), sig) || strings.Contains(metrics, sig)) {
				t.Errorf("the %s token reached the logs or metrics", name)
			}
		}
		if !strings.Contains(metrics, `terdut_operator_identity_refusals_total{reason="audience"}`) {
			t.Errorf("metrics: got no refusals counted by reason, want them")
		}
		if !strings.Contains(srv.Logs.String(), `"reason":"lifetime"`) {
			t.Errorf("logs: got no refusal with its reason, want one")
		}
	})
}

// TestOperatorIdentity_WithOperatorToken: with both methods configured, each proves the
// operator, and the audit says which.
func TestOperatorIdentity_WithOperatorToken(t *testing.T) {
	is := satest.New(t, satest.Options{})
	srv := identityServer(t, is, true)
	if resp := claim(t, srv, apitest.OperatorToken); resp.Status != http.StatusCreated {
		t.Fatalf("claim with the operator token: got %d %s, want 201", resp.Status, resp.Body)
	}
	if a := lastAudit(t, srv.Store); a.Method != store.AuthOperatorToken || a.Subject != "" {
		t.Fatalf("audit: got %+v, want operator_token and no subject", a)
	}
	if resp := reset(t, srv, apitest.Request{Bearer: is.Sign(t, opClaims("p"))}); resp.Status != http.StatusOK {
		t.Fatalf("reset with the service-account token: got %d %s, want 200", resp.Status, resp.Body)
	}
	if resp := claim(t, srv, "operator-token-for-tests-0123456789abcdeX"); resp.Status != http.StatusUnauthorized {
		t.Fatalf("claim with a wrong operator token: got %d %s, want 401", resp.Status, resp.Body)
	}
}

// TestOperatorIdentity_IssuerUnavailable: when the issuer's keys cannot be read, a token can
// be neither accepted nor refused: 503 with Retry-After, and nothing changes.
func TestOperatorIdentity_IssuerUnavailable(t *testing.T) {
	is := satest.New(t, satest.Options{Bearer: "only-for-the-right-caller"})
	srv := identityServer(t, is, false)
	resp := claim(t, srv, is.Sign(t, opClaims("p")))
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d %s (Retry-After %q), want 503 with Retry-After", resp.Status, resp.Body, resp.Header.Get("Retry-After"))
	}
	if got := mustStatus(t, srv); got != (statusBody{"pending", 0}) {
		t.Fatalf("got %+v, want still pending", got)
	}
}

// TestOperatorIdentity_ConcurrentClaims: service-account claims raced across two replicas of
// one database, round after round: exactly one wins each round, the others get 403, and the
// audit names the winner's pod.
func TestOperatorIdentity_ConcurrentClaims(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v, err := opjwt.New(opjwt.Config{Issuer: is.URL(), Audience: opAudience,
		Subjects: []string{satest.SubjectOf(opNamespace, opAccount)}})
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.MustDatabase(t)
	mutate := func(o *api.Options) { o.OperatorTokens, o.OperatorIdentity, o.ResetLimit = nil, v, store.RateLimit{} }
	replicas := []*apitest.Server{apitest.NewServer(t, db, mutate), apitest.NewServer(t, db, mutate)}
	const rounds, claimants = 5, 8
	tokens := make([]string, claimants)
	for i := range tokens {
		tokens[i] = is.Sign(t, opClaims(fmt.Sprintf("operator-%d", i)))
	}
	for round := 1; round <= rounds; round++ {
		if round > 1 {
			if resp := reset(t, replicas[round%2], apitest.Request{Bearer: tokens[0]}); resp.Status != http.StatusOK {
				t.Fatalf("round %d: reset: got %d %s, want 200", round, resp.Status, resp.Body)
			}
		}
		statuses := make([]int, claimants)
		var wg sync.WaitGroup
		for i := range claimants {
			wg.Go(func() {
				resp, err := replicas[i%2].Do(apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: tokens[i]})
				if err != nil {
					t.Error(err)
					return
				}
				statuses[i] = resp.Status
			})
		}
		wg.Wait()
		winner := -1
		for i, st := range statuses {
			switch {
			case st == http.StatusCreated && winner < 0:
				winner = i
			case st == http.StatusCreated:
				t.Fatalf("round %d: claimants %d and %d both got 201, want one", round, winner, i)
			case st != http.StatusForbidden:
				t.Fatalf("round %d: claimant %d got %d, want 201 or 403", round, i, st)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: got statuses %v, want one 201", round, statuses)
		}
		if a := lastAudit(t, replicas[0].Store); a.Action != "claim" || a.Generation != int64(round) || a.Pod != fmt.Sprintf("operator-%d", winner) {
			t.Fatalf("round %d: audit got %+v, want the claim of generation %d by operator-%d", round, a, round, winner)
		}
	}
}
