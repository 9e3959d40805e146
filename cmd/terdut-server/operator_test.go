package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// TestServe_OperatorIdentityOnly: a server whose operator proves itself only with a
// service-account token does not call its claim open, says who may claim, and takes the
// claim from that identity alone.
func TestServe_OperatorIdentityOnly(t *testing.T) {
	is := satest.New(t, satest.Options{})
	subject := satest.SubjectOf("ops", "terdut-operator")
	e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t), "TERDUT_OPERATOR_OIDC_ISSUER": is.URL(),
		"TERDUT_OPERATOR_OIDC_SUBJECTS": subject}
	srv := startServe(t, e, "--public-url", "http://terdut.test:8080")
	mustContain(t, "stdout", srv.Stdout.String(), "not claimed yet", "service-account token of "+subject, "audience terdut-server")
	mustNotContain(t, "stderr", srv.Stderr.String(), "no operator token configured")

	status, body := srv.do(t, http.MethodPost, "/api/bootstrap", "")
	mustStatus(t, "claim without a token", status, body, http.StatusUnauthorized, nil)
	token := is.Sign(t, satest.ServiceAccount("ops", "terdut-operator", "op-0", "terdut-server"))
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap", token)
	mustStatus(t, "claim with the service-account token", status, body, http.StatusCreated, nil)
	if err := srv.stop(); err != nil {
		t.Errorf("stop: got %v, want nil", err)
	}
	mustNotContain(t, "stderr", srv.Stderr.String(), token)
}

// TestBootstrapCLI_StatusShowsOperatorIdentity: `bootstrap status` shows how the operator
// proved itself and, for a service-account token, who it was.
func TestBootstrapCLI_StatusShowsOperatorIdentity(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	e := env{"TERDUT_DATABASE_URL": db}
	mustRun(t, e, "migrate")
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Claim(context.Background(), store.AuditInfo{Actor: store.ActorOperator, RemoteAddr: "10.0.0.7",
		Method: store.AuthServiceAccount, Subject: "system:serviceaccount:ops:terdut-operator", Pod: "op-7"}); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, e, "bootstrap", "status").Stdout
	mustContain(t, "bootstrap status", out, `"auth_method": "service_account"`, `"subject": "system:serviceaccount:ops:terdut-operator"`, `"pod": "op-7"`)
	if strings.Count(out, `"auth_method"`) != 1 {
		t.Errorf("bootstrap status: got %s, want auth_method only on the operator's row", out)
	}
}

// TestServe_OperatorIdentityWarm: the issuer's keys are read at start, so that a wrong issuer
// is in the log before the operator's first claim; the server serves either way.
func TestServe_OperatorIdentityWarm(t *testing.T) {
	const complaint = "cannot read the operator identity issuer's keys"
	subject := satest.SubjectOf("ops", "terdut-operator")

	t.Run("Reachable", func(t *testing.T) {
		is := satest.New(t, satest.Options{})
		srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t), "TERDUT_OPERATOR_OIDC_ISSUER": is.URL(),
			"TERDUT_OPERATOR_OIDC_SUBJECTS": subject})
		waitUntil(t, "the keys read at start", func() bool {
			return strings.Contains(srv.Stderr.String(), `"msg":"read the operator identity issuer's keys"`)
		})
		if n := is.JWKSFetches(); n != 1 {
			t.Errorf("JWKS fetches: got %d, want 1", n)
		}
		if err := srv.stop(); err != nil {
			t.Errorf("stop: got %v, want nil", err)
		}
		mustNotContain(t, "stderr", srv.Stderr.String(), complaint)
	})

	t.Run("ErrUnreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody answers on once closed
		if err != nil {
			t.Fatal(err)
		}
		issuer := "http://" + ln.Addr().String()
		ln.Close()
		srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t), "TERDUT_OPERATOR_OIDC_ISSUER": issuer,
			"TERDUT_OPERATOR_OIDC_SUBJECTS": subject})
		waitUntil(t, "the complaint in the log", func() bool { return strings.Contains(srv.Stderr.String(), complaint) })
		mustContain(t, "stderr", srv.Stderr.String(), "--operator-oidc-issuer", issuer)
		status, body := srv.do(t, http.MethodGet, "/healthz", "")
		mustStatus(t, "healthz", status, body, http.StatusOK, nil)
	})
}

// waitUntil waits for cond within startTimeout: a budget that bounds a hang, not speed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, startTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
