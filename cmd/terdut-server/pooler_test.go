package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_Pooler: with TERDUT_DATABASE_POOLER=transaction, `terdut-server migrate` and
// replicas started behind a transaction-mode PgBouncer (as Zalando's pooler) migrate the
// database, are ready, and serve the claim.
func TestServe_Pooler(t *testing.T) {
	p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{PoolSize: 3})
	e := env{"TERDUT_DATABASE_URL": p.URL(t, pgtest.MustEmptyDatabase(t)), "TERDUT_DATABASE_POOLER": "transaction"}
	if r := mustRun(t, e, "migrate"); !strings.Contains(r.Stdout, "the schema is current") {
		t.Fatalf("terdut-server migrate through PgBouncer: got %q, want the schema current", r.Stdout)
	}
	first, second := startServe(t, e), startServe(t, e)
	for _, srv := range []*server{first, second} {
		status, body := srv.get(t, "/readyz", "")
		mustStatus(t, "GET /readyz", status, body, http.StatusOK, nil)
	}
	status, body := second.do(t, http.MethodPost, "/api/bootstrap", "")
	mustStatus(t, "POST /api/bootstrap", status, body, http.StatusCreated, nil)
}

// TestServe_PoolerLoginRetry: a start whose login the pooler refuses (the role is not there
// yet, as while the operator creates it) retries with a log line that never holds the
// password, and starts once the role exists.
func TestServe_PoolerLoginRetry(t *testing.T) {
	p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{})
	dbURL := pgtest.MustEmptyDatabase(t)
	db := p.Install(t, dbURL)
	const role = "late_role"
	url := p.URLFor(role, secretPassword, db)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	args := []string{"serve", "--listen", "127.0.0.1:0", "--password-hash-cost", "4"}
	go func() {
		done <- run(ctx, args, env{"TERDUT_DATABASE_URL": url, "TERDUT_DATABASE_POOLER": "transaction"}.get, stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(startTimeout)
		for !strings.Contains(stderr.String(), what) {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("serve returned (%v) before logging %q; stderr:\n%s", err, what, stderr)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q within %s; stderr:\n%s", what, startTimeout, stderr)
			}
		}
	}
	waitLog("the database refused the login; retrying")

	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, sql := range []string{"CREATE ROLE " + role + " LOGIN PASSWORD '" + secretPassword + "'",
		"GRANT CREATE, USAGE ON SCHEMA public TO " + role} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.AdminURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			c.Close(context.Background())
		}
	})
	defer func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role)
	}()
	waitLog("terdut-server listening")
	mustNotContain(t, "the server's log", stderr.String()+stdout.String(), secretPassword)
}
