//go:build kube

package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// TestKube_TokenReview: verified offline, the operator's token keeps claiming after its pod
// or its service account is deleted, until it expires. With --operator-oidc-token-review-url
// the server asks the API server about each token (the example manifests' RBAC lets its
// account create TokenReviews), so such a token claims and resets nothing; and while the API
// server cannot answer, claims and resets answer 503 rather than trust the token offline.
func TestKube_TokenReview(t *testing.T) {
	t.Parallel() // each test has an API server and a database of its own
	k := startKube(t, kubetest.Options{})
	// The URL as a person may write it, with a trailing slash. The test resets many times a
	// minute (mustBeRevoked's tries that the API server still accepts each reset, and more
	// of them on a busy machine): more than the default limit of 5, shared by both servers.
	review := env{"TERDUT_OPERATOR_OIDC_TOKEN_REVIEW_URL": k.URL + "/", "TERDUT_OPERATOR_OIDC_TOKEN_REVIEW_CA_FILE": k.CA.File,
		"TERDUT_BOOTSTRAP_RESET_LIMIT": resetsAllowed}
	s := k.settings(t, k.Issuer(), review)
	reviewed := startServe(t, s)
	mustContain(t, "log", reviewed.Stderr.String(), `"token_review":true`)
	offline := startServe(t, env{"TERDUT_DATABASE_URL": s["TERDUT_DATABASE_URL"], "TERDUT_OPERATOR_OIDC_ISSUER": k.Issuer(),
		"TERDUT_OPERATOR_OIDC_CA_FILE": k.CA.File, "TERDUT_OPERATOR_OIDC_ISSUER_TOKEN_FILE": k.serverToken,
		"TERDUT_OPERATOR_OIDC_SUBJECTS": operatorSubject, "TERDUT_BOOTSTRAP_RESET_LIMIT": resetsAllowed}) // the same database, offline checks only

	status, body := reviewed.do(t, http.MethodPost, "/api/bootstrap", k.operatorToken())
	mustStatus(t, "claim with a live pod's token", status, body, http.StatusCreated, nil)

	t.Run("PodDeleted", func(t *testing.T) {
		k.CreatePod(operatorNS, "terdut-operator-1", operatorSA)
		token := k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "terdut-operator-1"})
		k.DeletePod(operatorNS, "terdut-operator-1")
		mustBeRevoked(t, reviewed, token, "reset with a deleted pod's token, reviewed")
		mustContain(t, "log", reviewed.Stderr.String(), `"reason":"revoked"`)
		status, body := offline.do(t, http.MethodPost, "/api/bootstrap/reset", token)
		mustStatus(t, "the same token, offline only", status, body, http.StatusOK, nil)
		status, body = reviewed.do(t, http.MethodPost, "/api/bootstrap", token)
		mustStatus(t, "claim with a deleted pod's token, reviewed", status, body, http.StatusUnauthorized, nil)
		status, body = reviewed.do(t, http.MethodPost, "/api/bootstrap", k.operatorToken())
		mustStatus(t, "claim with a live pod's token", status, body, http.StatusCreated, nil)
	})

	t.Run("ServiceAccountRecreated", func(t *testing.T) {
		token := k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}})
		k.DeleteServiceAccount(operatorNS, operatorSA)
		mustBeRevoked(t, reviewed, token, "reset with a deleted account's token")
		k.CreateServiceAccount(operatorNS, operatorSA) // the same name, a new uid
		mustBeRevoked(t, reviewed, token, "reset with the token of the account before it was recreated")
		status, body := offline.do(t, http.MethodPost, "/api/bootstrap/reset", token)
		mustStatus(t, "the same token, offline only", status, body, http.StatusOK, nil)
		fresh := k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}})
		status, body = reviewed.do(t, http.MethodPost, "/api/bootstrap", fresh)
		mustStatus(t, "claim with the recreated account's token", status, body, http.StatusCreated, nil)
	})

	t.Run("APIServerAway", func(t *testing.T) {
		token := k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}})
		k.Stop()
		status, body := reviewed.do(t, http.MethodPost, "/api/bootstrap/reset", token)
		mustStatus(t, "reset while the API server is away, reviewed", status, body, http.StatusServiceUnavailable, nil)
		mustContain(t, "log", reviewed.Stderr.String(), "could not be asked to review the token")
		status, body = reviewed.get(t, "/readyz", "")
		mustStatus(t, "readiness while the API server is away", status, body, http.StatusOK, nil)
		k.Restart(k.Options())
		status, body = reviewed.do(t, http.MethodPost, "/api/bootstrap/reset", token)
		mustStatus(t, "reset once the API server is back", status, body, http.StatusOK, nil)
	})
}

// resetsAllowed is TestKube_TokenReview's reset limit a minute: more than its three calls of
// mustBeRevoked can make (a try every 250 ms for up to revokedWithin, 80 each) and its other
// resets.
const resetsAllowed = "400"

// revokedWithin bounds how long a reviewed token of a deleted pod or account may still be
// accepted: the API server learns of the deletion through its own cache of objects
// (milliseconds), and a review that accepted the token in that gap is remembered for 10 s.
const revokedWithin = 20 * time.Second

// mustBeRevoked resets with token until the server refuses it as revoked, failing the test if
// that takes longer than revokedWithin. Each try that went through reset an install that the
// test claims again later: a reset is idempotent.
func mustBeRevoked(t *testing.T, srv *server, token, what string) {
	t.Helper()
	start := time.Now()
	for {
		status, body := srv.do(t, http.MethodPost, "/api/bootstrap/reset", token)
		if status == http.StatusUnauthorized {
			t.Logf("%s: refused after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if status != http.StatusOK || time.Since(start) > revokedWithin {
			t.Fatalf("%s: got %d %s after %s, want 401 within %s", what, status, body, time.Since(start).Round(time.Millisecond), revokedWithin)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
