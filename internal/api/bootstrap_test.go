package api_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

type statusBody struct {
	State      string `json:"state"`
	Generation int64  `json:"generation"`
}

func mustStatus(t *testing.T, srv *apitest.Server) statusBody {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/bootstrap/status"})
	if resp.Status != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status: got %d (Cache-Control %q), want 200 no-store", resp.Status, resp.Header.Get("Cache-Control"))
	}
	var b statusBody
	resp.JSON(t, &b)
	return b
}

func claim(t *testing.T, srv *apitest.Server, bearer string) apitest.Response {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: bearer})
}

func TestBootstrap_Claim(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		srv := newServer(t)
		if got := mustStatus(t, srv); got != (statusBody{"pending", 0}) {
			t.Fatalf("got %+v, want pending generation 0", got)
		}
		resp := claim(t, srv, apitest.OperatorToken)
		if resp.Status != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("got %d %s, want 201 no-store", resp.Status, resp.Body)
		}
		var body struct {
			User struct {
				ID                    int64
				Username, Email, Role string
				Kind                  string
			}
			APIKey struct {
				ID        int64
				UserID    int64 `json:"user_id"`
				Name, Key string
			} `json:"api_key"`
			Generation int64
		}
		resp.JSON(t, &body)
		if body.User.Username != store.PrincipalUsername || body.User.Email != store.PrincipalEmail ||
			body.User.Role != "admin" || body.User.Kind != "service" || body.Generation != 1 {
			t.Fatalf("got %+v, want the admin service principal at generation 1", body)
		}
		if _, err := hex.DecodeString(body.APIKey.Key); err != nil || len(body.APIKey.Key) != 64 {
			t.Fatalf("got key %q, want 64 hex characters", body.APIKey.Key)
		}
		if got := mustStatus(t, srv); got != (statusBody{"complete", 1}) {
			t.Fatalf("got %+v, want complete generation 1", got)
		}
		me := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: body.APIKey.Key})
		if me.Status != http.StatusOK {
			t.Fatalf("the claimed key: got %d, want 200", me.Status)
		}
		var stored int
		err := srv.Store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM api_keys WHERE key_hash = $1::bytea OR encode(key_hash, 'hex') = $2`,
			[]byte(body.APIKey.Key), body.APIKey.Key).Scan(&stored)
		if err != nil || stored != 0 {
			t.Fatalf("got %d rows holding the plaintext key (err %v), want 0", stored, err)
		}
	})
	t.Run("ErrAlreadyCompleted", func(t *testing.T) {
		srv := newServer(t)
		srv.MustClaim(t)
		resp := claim(t, srv, apitest.OperatorToken)
		if resp.Status != http.StatusForbidden || resp.Code() != "bootstrap_already_completed" {
			t.Fatalf("got %d %s, want 403 bootstrap_already_completed", resp.Status, resp.Body)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		srv := newServer(t)
		for name, bearer := range map[string]string{"Missing": "", "Wrong": strings.Repeat("x", 40),
			"Prefix": apitest.OperatorToken[:32], "Longer": apitest.OperatorToken + "0"} {
			resp := claim(t, srv, bearer)
			if resp.Status != http.StatusUnauthorized || resp.Code() != "unauthorized" ||
				!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s token: got %d %s %q, want 401 unauthorized with WWW-Authenticate", name, resp.Status, resp.Body, resp.Header)
			}
		}
		if got := mustStatus(t, srv); got.State != "pending" {
			t.Fatalf("got %s after refused claims, want pending", got.State)
		}
	})
	t.Run("ErrAPIKeyOrSessionNeverClaims", func(t *testing.T) {
		// An admin with a key and a session exists while pending (made directly in the store, as an
		// upgraded or gate-off install would have). Neither credential may claim.
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.Gate = false })
		admin := apitest.MustPerson(t, srv.Store, "root-admin", store.RoleAdmin)
		cookie := srv.MustLogin(t, admin.User.Username, admin.Password)
		if resp := claim(t, srv, admin.APIKey); resp.Status != http.StatusUnauthorized {
			t.Fatalf("admin API key: got %d %s, want 401", resp.Status, resp.Body)
		}
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Cookie: cookie})
		if resp.Status != http.StatusUnauthorized {
			t.Fatalf("admin session: got %d %s, want 401", resp.Status, resp.Body)
		}
		if got := mustStatus(t, srv); got.State != "pending" {
			t.Fatalf("got %s, want pending", got.State)
		}
	})
	t.Run("OpenWithoutOperatorToken", func(t *testing.T) {
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens = nil })
		if resp := claim(t, srv, ""); resp.Status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201 (no token configured: the claim is open)", resp.Status, resp.Body)
		}
	})
}

func TestBootstrap_TokenRotation(t *testing.T) {
	const newToken = "rotated-operator-token-0123456789abcdefghij"
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	apitest.WriteFile(t, path, apitest.OperatorToken+"\n")
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.OperatorTokens = apitest.LoadTokenFile(t, path, o.Logger)
	})
	if resp := claim(t, srv, newToken); resp.Status != http.StatusUnauthorized {
		t.Fatalf("new token before rotation: got %d, want 401", resp.Status)
	}
	// Rotation while the server runs: add the new token, then drop the old one.
	apitest.WriteFile(t, path, "# rotation in progress\n"+apitest.OperatorToken+"\n"+newToken+"\n")
	if resp := claim(t, srv, newToken); resp.Status != http.StatusCreated {
		t.Fatalf("new token during rotation: got %d %s, want 201", resp.Status, resp.Body)
	}
	apitest.WriteFile(t, path, newToken+"\n")
	reset := func(token string) int {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: token}).Status
	}
	if got := reset(apitest.OperatorToken); got != http.StatusUnauthorized {
		t.Fatalf("old token after rotation: got %d, want 401", got)
	}
	if got := reset(newToken); got != http.StatusOK {
		t.Fatalf("new token after rotation: got %d, want 200", got)
	}
	// A file that turns invalid keeps the last good tokens in force.
	apitest.WriteFile(t, path, "short\n")
	if got := reset(newToken); got != http.StatusOK {
		t.Fatalf("after an invalid rewrite: got %d, want 200 with the last good token", got)
	}
	if logs := srv.Logs.String(); !strings.Contains(logs, "operator token file is invalid") {
		t.Fatalf("got logs %q, want the invalid file reported", logs)
	}
}

func TestBootstrap_ConcurrentClaims(t *testing.T) {
	db := pgtest.MustDatabase(t)
	servers := []*apitest.Server{apitest.NewServer(t, db, nil), apitest.NewServer(t, db, nil)}
	for round := range 10 {
		if round > 0 {
			resp := servers[round%2].MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset",
				Bearer: apitest.OperatorToken})
			if resp.Status != http.StatusOK && resp.Status != http.StatusTooManyRequests {
				t.Fatalf("reset: got %d %s", resp.Status, resp.Body)
			}
			if resp.Status == http.StatusTooManyRequests {
				if _, err := servers[0].Store.Reset(context.Background(), store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := servers[i%2].Do(apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken})
				if err != nil {
					t.Error(err)
					return
				}
				statuses[i] = resp.Status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusForbidden:
			default:
				t.Fatalf("round %d: got status %d, want 201 or 403", round, s)
			}
		}
		if created != 1 {
			t.Fatalf("round %d: got %d claims answered 201 (%v), want exactly 1", round, created, statuses)
		}
		if live := count(t, servers[0], `SELECT count(*) FROM api_keys k
			JOIN bootstrap_state b ON b.principal_id = k.user_id WHERE k.revoked_at IS NULL`); live != 1 {
			t.Fatalf("round %d: got %d live principal keys, want 1", round, live)
		}
	}
}
