package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func reset(t *testing.T, srv *apitest.Server, req apitest.Request) apitest.Response {
	t.Helper()
	req.Method, req.Path = http.MethodPost, "/api/bootstrap/reset"
	return srv.MustDo(t, req)
}

// humanState is everything of people's that a reset must leave alone.
func humanState(t *testing.T, st *store.Store) string {
	t.Helper()
	var s string
	err := st.Pool().QueryRow(context.Background(), `SELECT coalesce(string_agg(x, ';' ORDER BY x), '') FROM (
		SELECT format('u%s:%s:%s:%s:%s', id, username, email, role, password_hash) AS x FROM users WHERE kind = 'human'
		UNION ALL SELECT format('k%s:%s:%s:%s', k.id, k.user_id, k.revoked_at, encode(k.key_hash, 'hex'))
			FROM api_keys k JOIN users u ON u.id = k.user_id WHERE u.kind = 'human'
		UNION ALL SELECT format('s%s:%s:%s:%s', s.id, s.user_id, s.revoked_at, s.expires_at)
			FROM sessions s JOIN users u ON u.id = s.user_id WHERE u.kind = 'human') t`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBootstrap_Reset(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		srv := newServer(t)
		oldKey := srv.MustClaim(t)
		admin := apitest.MustPerson(t, srv.Store, "ops-admin", store.RoleAdmin)
		member := apitest.MustPerson(t, srv.Store, "member", store.RoleMember)
		adminCookie := srv.MustLogin(t, admin.User.Username, admin.Password)
		memberCookie := srv.MustLogin(t, member.User.Username, member.Password)
		before := humanState(t, srv.Store)

		resp := reset(t, srv, apitest.Request{Bearer: apitest.OperatorToken})
		var body struct {
			State          string `json:"state"`
			Generation     int64  `json:"generation"`
			RevokedAPIKeys int64  `json:"revoked_api_keys"`
		}
		resp.JSON(t, &body)
		if resp.Status != http.StatusOK || body.State != "pending" || body.Generation != 1 || body.RevokedAPIKeys != 1 {
			t.Fatalf("got %d %+v, want 200 pending generation 1 revoked 1", resp.Status, body)
		}
		if after := humanState(t, srv.Store); after != before {
			t.Fatalf("people's data changed:\n got %s\nwant %s", after, before)
		}
		if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: oldKey}).Status; got != http.StatusUnauthorized {
			t.Fatalf("principal's old key after reset: got %d, want 401", got)
		}
		for _, c := range []*http.Cookie{adminCookie, memberCookie} {
			if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c}).Status; got != http.StatusOK {
				t.Fatalf("a person's session after reset: got %d, want 200", got)
			}
		}
		for _, key := range []string{admin.APIKey, member.APIKey} {
			if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key}).Status; got != http.StatusOK {
				t.Fatalf("a person's key after reset: got %d, want 200", got)
			}
		}
		// Idempotent while pending.
		resp = reset(t, srv, apitest.Request{Bearer: apitest.OperatorToken})
		resp.JSON(t, &body)
		if resp.Status != http.StatusOK || body.State != "pending" || body.RevokedAPIKeys != 0 {
			t.Fatalf("second reset: got %d %+v, want 200 pending revoked 0", resp.Status, body)
		}
		// The next claim reuses the principal and bumps the generation.
		newKey := srv.MustClaim(t)
		var me struct{ User struct{ Username string } }
		srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: newKey}).JSON(t, &me)
		if me.User.Username != store.PrincipalUsername || mustStatus(t, srv).Generation != 2 {
			t.Fatalf("got %+v at generation %d, want the principal at generation 2", me, mustStatus(t, srv).Generation)
		}
		if principals := count(t, srv, `SELECT count(*) FROM users WHERE kind = 'service'`); principals != 1 {
			t.Fatalf("got %d service users, want the one principal reused", principals)
		}
		audit, err := srv.Store.BootstrapAudit(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range audit {
			actions = append(actions, e.Action+"/"+string(e.Actor)+"/"+strconv.FormatInt(e.Generation, 10))
			if e.Actor == store.ActorOperator && e.RemoteAddr != "127.0.0.1" {
				t.Fatalf("audit row %+v: want remote address 127.0.0.1", e)
			}
		}
		want := "backfill/migration/0 claim/operator/1 reset/operator/1 reset/operator/1 claim/operator/2"
		if got := strings.Join(actions, " "); got != want {
			t.Fatalf("got audit %q, want %q", got, want)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		srv := newServer(t)
		principalKey := srv.MustClaim(t)
		admin := apitest.MustPerson(t, srv.Store, "ops-admin", store.RoleAdmin)
		cookie := srv.MustLogin(t, admin.User.Username, admin.Password)
		for name, req := range map[string]apitest.Request{
			"Missing":         {},
			"Wrong":           {Bearer: "not-the-operator-token-0123456789abcdef"},
			"AdminAPIKey":     {Bearer: admin.APIKey},
			"PrincipalAPIKey": {Bearer: principalKey},
			"AdminSession":    {Cookie: cookie},
		} {
			if resp := reset(t, srv, req); resp.Status != http.StatusUnauthorized || resp.Code() != "unauthorized" {
				t.Fatalf("%s: got %d %s, want 401 unauthorized", name, resp.Status, resp.Body)
			}
		}
		if got := mustStatus(t, srv); got.State != "complete" {
			t.Fatalf("got %s after refused resets, want complete", got.State)
		}
	})
	t.Run("ErrOperatorTokenNotConfigured", func(t *testing.T) {
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens = nil })
		if resp := claim(t, srv, ""); resp.Status != http.StatusCreated {
			t.Fatalf("claim: got %d", resp.Status)
		}
		resp := reset(t, srv, apitest.Request{Bearer: apitest.OperatorToken})
		if resp.Status != http.StatusForbidden || resp.Code() != "operator_token_not_configured" {
			t.Fatalf("got %d %s, want 403 operator_token_not_configured", resp.Status, resp.Body)
		}
	})
	t.Run("ErrRateLimited", func(t *testing.T) {
		db := pgtest.MustDatabase(t)
		limit := func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 3, Window: 60e9} }
		a, b := apitest.NewServer(t, db, limit), apitest.NewServer(t, db, limit)
		for i, srv := range []*apitest.Server{a, b, a} {
			if got := reset(t, srv, apitest.Request{Bearer: apitest.OperatorToken}).Status; got != http.StatusOK {
				t.Fatalf("reset %d: got %d, want 200", i+1, got)
			}
		}
		// The limit is counted in the database, so the other replica refuses too.
		resp := reset(t, b, apitest.Request{Bearer: apitest.OperatorToken})
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.Status != http.StatusTooManyRequests || resp.Code() != "rate_limited" || retry < 1 || retry > 60 {
			t.Fatalf("got %d %s Retry-After %q, want 429 rate_limited with 1..60", resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
		// Retry-After rounds up: a client that waits what it says is not refused again.
		remaining := float64(0)
		_ = a.Store.Pool().QueryRow(context.Background(), `SELECT extract(epoch FROM min(at) + interval '60 seconds' - now())
			FROM (SELECT at FROM bootstrap_audit WHERE action = 'reset' ORDER BY at DESC LIMIT 3) r`).Scan(&remaining)
		if float64(retry) < remaining {
			t.Fatalf("got Retry-After %d, want at least the %.2f s left in the window", retry, remaining)
		}
		audit, _ := a.Store.BootstrapAudit(context.Background())
		if resets := countAction(audit, "reset"); resets != 3 {
			t.Fatalf("got %d reset audit rows, want 3 (a refused reset writes none)", resets)
		}
	})
}

func countAction(audit []store.AuditEntry, action string) int {
	n := 0
	for _, e := range audit {
		if e.Action == action {
			n++
		}
	}
	return n
}
