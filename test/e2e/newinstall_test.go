package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestE2E_NewInstall is a new install with two replicas behind a load balancer: a person who
// reaches it before the operator is refused (and nothing is created), the operator's
// Reconcile claims it, and then the person signs in, starting on one replica and finishing
// on the other.
func TestE2E_NewInstall(t *testing.T) {
	t.Parallel()
	db := pgtest.MustEmptyDatabase(t)
	in := newInstall(t, db)
	in.addPerson("erin", groupOncall)
	// Both replicas start at once on the empty database, and both migrate it.
	a, b := launch(t, "replica-a", in.settings), launch(t, "replica-b", in.settings)
	a.waitReady(t)
	b.waitReady(t)

	erin := newBrowser(t)
	r := erin.do(t, a, request{target: "/auth/oidc/login?login_hint=erin"})
	if r.status != http.StatusServiceUnavailable || r.code() != "bootstrap_pending" || r.header.Get("Retry-After") == "" {
		t.Errorf("sign-in before the claim, as an API client: got %d %s (Retry-After %q), want 503 bootstrap_pending with Retry-After",
			r.status, r.body, r.header.Get("Retry-After"))
	}
	r = erin.do(t, b, request{target: "/auth/oidc/login?login_hint=erin", accept: "text/html,application/xhtml+xml"})
	if r.status != http.StatusServiceUnavailable || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(r.body), "still being set up") || r.header.Get("Retry-After") == "" {
		t.Errorf("sign-in before the claim, in a browser: got %d %q (Retry-After %q) %s, want 503 with the setup page",
			r.status, r.header.Get("Content-Type"), r.header.Get("Retry-After"), r.body)
	}
	r = erin.do(t, b, request{target: "/auth/oidc/callback?state=forged&code=forged"})
	if r.status != http.StatusServiceUnavailable || r.code() != "bootstrap_pending" {
		t.Errorf("sign-in callback before the claim: got %d %s, want 503 bootstrap_pending", r.status, r.body)
	}
	if n := countUsers(t, db); n != 0 {
		t.Fatalf("users after refused sign-ins: got %d, want 0", n)
	}
	if erin.session() != "" {
		t.Fatal("session cookie after refused sign-ins: got one, want none")
	}

	op := in.operator(t, b)
	res, err := op.Reconcile(t.Context(), "")
	if err != nil || res.Action != client.ActionClaimed || res.Generation != 1 {
		t.Fatalf("reconcile: got %+v, %v, want claimed at generation 1", res, err)
	}

	// The sign-in starts on one replica and finishes on the other; both honour the session.
	erin.signIn(t, in, a, b, "erin")
	for _, s := range []*server{a, b} {
		if u := erin.me(t, s, ""); u.Username != "erin" || u.Kind != "human" || u.Role != "member" {
			t.Errorf("/api/me on %s: got %+v, want erin, a member", s.name, u)
		}
	}
	if res, err := in.operator(t, a).Reconcile(t.Context(), res.APIKey.Key); err != nil || res.Action != client.ActionNone {
		t.Errorf("the next reconcile, on the other replica: got %+v, %v, want none", res, err)
	}

	a.stop(t)
	b.stop(t)
	assertNoSecrets(t, []string{in.operatorToken, in.idp.ClientSecret, res.APIKey.Key, erin.session()}, a, b)
}

// countUsers counts the users in the database.
func countUsers(t *testing.T, db string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatalf("connect to the database: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM users`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
