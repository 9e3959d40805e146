package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

func TestError_Is(t *testing.T) {
	sentinels := map[string]error{
		"ErrAlreadyClaimed":             client.ErrAlreadyClaimed,
		"ErrUnauthorized":               client.ErrUnauthorized,
		"ErrOperatorTokenNotConfigured": client.ErrOperatorTokenNotConfigured,
		"ErrRateLimited":                client.ErrRateLimited,
		"ErrBootstrapPending":           client.ErrBootstrapPending,
		"ErrUnavailable":                client.ErrUnavailable,
	}
	tests := []struct {
		status int
		code   string
		want   string // the one sentinel it matches, "" for none
	}{
		{403, "bootstrap_already_completed", "ErrAlreadyClaimed"},
		{401, "unauthorized", "ErrUnauthorized"},
		{401, "", "ErrUnauthorized"},
		{403, "operator_token_not_configured", "ErrOperatorTokenNotConfigured"},
		{429, "rate_limited", "ErrRateLimited"},
		{503, "bootstrap_pending", "ErrBootstrapPending"},
		{503, "unavailable", "ErrUnavailable"},
		{500, "internal", "ErrUnavailable"},
		{502, "", "ErrUnavailable"},
		{403, "forbidden", ""},
		{404, "not_found", ""},
		{400, "invalid_json", ""},
		{302, "", ""},
	}
	for _, tt := range tests {
		err := fmt.Errorf("wrapped: %w", &client.Error{Op: "POST /api/bootstrap", Status: tt.status, Code: tt.code})
		for name, sentinel := range sentinels {
			if got, want := errors.Is(err, sentinel), name == tt.want; got != want {
				t.Errorf("%d %s is %s: got %v, want %v", tt.status, tt.code, name, got, want)
			}
		}
	}
}

func TestError_Error(t *testing.T) {
	e := &client.Error{Op: "POST /api/bootstrap/reset", Status: 429, Code: "rate_limited",
		Message: "Too many requests of this kind; try again later.", RetryAfter: 42 * time.Second}
	want := "terdut-server POST /api/bootstrap/reset: 429 rate_limited: Too many requests of this kind; try again later. (retry after 42s)"
	if got := e.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestError_NoSecrets collects the errors of every failing call made with secrets in play and
// checks that none of them, however printed, holds a secret.
func TestError_NoSecrets(t *testing.T) {
	t.Parallel()
	const wrongToken = "wrong-operator-token-but-a-secret-all-the-same"
	srv := newServer(t, func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 1, Window: time.Hour} })
	open := newServer(t, func(o *api.Options) { o.OperatorTokens = nil })
	op, wrong := operator(t, srv), mustClient(t, srv.URL, client.WithOperatorToken(wrongToken))
	person := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	first := mustClaim(t, op)
	res, err := op.Reconcile(t.Context(), "") // revokes first's key
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	secrets := []string{apitest.OperatorToken, wrongToken, person.APIKey, person.Password, first.APIKey.Key, res.APIKey.Key}

	hanging := mustClient(t, newHangingServer(t).URL, client.WithOperatorToken(apitest.OperatorToken),
		client.WithTimeout(100*time.Millisecond))
	expired, cancel := context.WithCancel(t.Context())
	cancel()
	type failure struct {
		call string
		err  error
	}
	var failures []failure
	collect := func(call string) func(any, error) {
		return func(_ any, err error) { failures = append(failures, failure{call, err}) }
	}
	collect("claim when claimed")(op.Claim(t.Context()))
	collect("reset past the limit")(op.Reset(t.Context())) // the reconcile used the one reset
	collect("reconcile past the limit")(op.Reconcile(t.Context(), first.APIKey.Key))
	collect("claim with a wrong token")(wrong.Claim(t.Context()))
	collect("reset with a wrong token")(wrong.Reset(t.Context()))
	collect("reconcile with a wrong token")(wrong.Reconcile(t.Context(), ""))
	collect("reset with no token configured")(
		mustClient(t, open.URL, client.WithOperatorToken(apitest.OperatorToken)).Reset(t.Context()))
	collect("whoami with a revoked key")(op.Whoami(t.Context(), first.APIKey.Key))
	collect("whoami with a malformed key")(op.Whoami(t.Context(), wrongToken))
	collect("whoami with an unsendable key")(op.Whoami(t.Context(), wrongToken+"\n"))
	collect("claim timing out")(hanging.Claim(t.Context()))
	collect("whoami timing out")(hanging.Whoami(t.Context(), person.APIKey))
	collect("reset with an ended context")(hanging.Reset(expired))
	collect("new with an unsendable token")(client.New(srv.URL, client.WithOperatorToken(wrongToken+" ")))

	for _, f := range failures {
		if f.err == nil {
			t.Errorf("%s: got nil, want an error", f.call)
			continue
		}
		for _, text := range []string{f.err.Error(), fmt.Sprintf("%+v", f.err), fmt.Sprintf("%#v", f.err)} {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("%s: got %q, want no secret in it", f.call, text)
				}
			}
		}
	}

	// The client, printed, shows its server but no token.
	for _, text := range []string{fmt.Sprintf("%v %+v %#v %s", op, op, op, op), fmt.Sprintf("%v %+v %#v", wrong, wrong, wrong)} {
		if strings.Contains(text, apitest.OperatorToken) || strings.Contains(text, wrongToken) || !strings.Contains(text, srv.URL) {
			t.Errorf("got %q, want the server's URL and no token", text)
		}
	}
	// Values holding a new key, printed, logged or encoded whole, hide it.
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("claimed", "key", res.APIKey, "result", res, "claim", first)
	encoded, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{fmt.Sprint(res), fmt.Sprintf("%+v", res), fmt.Sprintf("%#v", res),
		fmt.Sprintf("%v %+v %#v", first, first, first), logs.String(), string(encoded)} {
		if strings.Contains(text, res.APIKey.Key) || strings.Contains(text, first.APIKey.Key) {
			t.Errorf("got %q, want the key redacted", text)
		}
	}
	if !strings.Contains(fmt.Sprint(res), "[redacted]") {
		t.Errorf("got %q, want the key shown as [redacted]", fmt.Sprint(res))
	}
	if res.APIKey.Key == "" || !mustCheckKey(t, op, res.APIKey.Key) {
		t.Error("the key itself: got empty or dead, want it readable and working")
	}
}
