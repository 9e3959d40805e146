package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/satest"
	"github.com/terdut-server/terdut-server/internal/store"
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
