package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// TestE2E_OperatorIdentity is an install with no operator secret: the server knows the
// operator only by its Kubernetes service-account token. The issuer serves its keys over TLS
// with a CA of its own and only to an authenticated caller, as the API server does; the
// server reads them with its own service-account token. The operator's client reads its
// projected token from a file that the kubelet rewrites between reconciles.
func TestE2E_OperatorIdentity(t *testing.T) {
	t.Parallel()
	db := pgtest.MustEmptyDatabase(t)
	dir := t.TempDir()
	is := satest.New(t, satest.Options{TLS: true, Bearer: "the-servers-own-service-account-token"})
	serverToken := writeSecret(t, dir, "server-sa-token", "the-servers-own-service-account-token")
	subject := satest.SubjectOf("terdut-operator-system", "terdut-operator")
	settings := map[string]string{
		"TERDUT_LISTEN":                          "127.0.0.1:0",
		"TERDUT_DATABASE_URL":                    db,
		"TERDUT_PUBLIC_URL":                      publicURL,
		"TERDUT_OPERATOR_OIDC_ISSUER":            is.URL(),
		"TERDUT_OPERATOR_OIDC_SUBJECTS":          subject,
		"TERDUT_OPERATOR_OIDC_CA_FILE":           is.CAFile(t, dir),
		"TERDUT_OPERATOR_OIDC_ISSUER_TOKEN_FILE": serverToken,
		"TERDUT_PASSWORD_HASH_COST":              "4",
		"TERDUT_SHUTDOWN_TIMEOUT":                "5s",
		"TERDUT_LOG_LEVEL":                       "debug",
	}
	srv := launch(t, "identity-only", settings)
	srv.waitReady(t)

	tokenFile := filepath.Join(dir, "operator-token")
	var tokens []string
	project := func(pod string) {
		t.Helper()
		tok := is.Sign(t, satest.ServiceAccount("terdut-operator-system", "terdut-operator", pod, "terdut-server"))
		tokens = append(tokens, tok)
		if err := os.WriteFile(tokenFile+".new", []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokenFile+".new", tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	op, err := client.New(srv.URL, client.WithOperatorTokenFile(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	anyone, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	// Not open to anyone: with only the identity configured, the claim needs it.
	if _, err := anyone.Claim(t.Context()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("claim without a token: got %v, want ErrUnauthorized", err)
	}

	project("terdut-operator-5f7c9-aaaaa")
	res, err := op.Reconcile(t.Context(), "")
	if err != nil || res.Action != client.ActionClaimed || res.Generation != 1 {
		t.Fatalf("first reconcile: got %+v, %v, want claimed at generation 1", res, err)
	}
	project("terdut-operator-5f7c9-bbbbb") // the kubelet rotated the token
	if res, err := op.Reconcile(t.Context(), res.APIKey.Key); err != nil || res.Action != client.ActionNone {
		t.Fatalf("reconcile with the held key: got %+v, %v, want none", res, err)
	}
	// The operator lost its Secret: the claim is reset and taken again with the new token.
	project("terdut-operator-5f7c9-ccccc")
	res, err = op.Reconcile(t.Context(), "")
	if err != nil || res.Action != client.ActionResetAndClaimed || res.Generation != 2 {
		t.Fatalf("reconcile without a key: got %+v, %v, want reset_and_claimed at generation 2", res, err)
	}
	if _, err := anyone.Reset(t.Context()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("reset without a token: got %v, want ErrUnauthorized", err)
	}

	want := []string{
		"claim service_account " + subject + " terdut-operator-5f7c9-aaaaa",
		"reset service_account " + subject + " terdut-operator-5f7c9-ccccc",
		"claim service_account " + subject + " terdut-operator-5f7c9-ccccc",
	}
	if got := operatorAudit(t, db); !slices.Equal(got, want) {
		t.Errorf("audit: got %q, want %q", got, want)
	}
	if is.Unauthorized() != 0 {
		t.Errorf("the issuer refused %d requests of the server, want 0: it must send its own token", is.Unauthorized())
	}
	srv.stop(t)
	assertNoSecrets(t, append(tokens, "the-servers-own-service-account-token", res.APIKey.Key), srv)
}

// operatorAudit returns the audit rows of the operator: action, method, subject and pod.
func operatorAudit(t *testing.T, db string) []string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT concat_ws(' ', action, auth_method, subject, pod)
		FROM bootstrap_audit WHERE actor = 'operator' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = strings.TrimSpace(got[i])
	}
	return got
}
