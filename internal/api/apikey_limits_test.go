package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// postKey asks for a key for the user with the given credentials.
func postKey(t *testing.T, srv *apitest.Server, userID int64, bearer string, body any) apitest.Response {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(userID, "/api-keys"), Bearer: bearer, Body: body})
}

func TestAPIKeys_Expiry(t *testing.T) {
	e := newCoreEnv(t, nil)
	alice := e.alice

	t.Run("OK", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		resp := postKey(t, e.srv, alice.User.ID, alice.APIKey, map[string]string{"name": "ci", "expires_at": at.Format(time.RFC3339)})
		wantStatus(t, resp, http.StatusCreated)
		var k keyWithExpiry
		resp.JSON(t, &k)
		if k.ExpiresAt == nil || !k.ExpiresAt.Equal(at) {
			t.Fatalf("got %s, want expires_at %s", resp.Body, at.Format(time.RFC3339))
		}
		if id, status := whoAmI(t, e, k.Key); id != alice.User.ID {
			t.Fatalf("the key before it expires: got user %d (status %d), want %d", id, status, alice.User.ID)
		}
		list := e.do(t, apitest.Request{Method: http.MethodGet, Path: userURL(alice.User.ID, "/api-keys"), Bearer: alice.APIKey})
		if !strings.Contains(string(list.Body), `"expires_at":"`+at.Format(time.RFC3339)+`"`) {
			t.Fatalf("list: got %s, want key %d with its expires_at", list.Body, k.ID)
		}
		if _, err := e.srv.Store.Pool().Exec(t.Context(),
			`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID); err != nil {
			t.Fatal(err)
		}
		resp = e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: k.Key})
		wantAPIError(t, resp, http.StatusUnauthorized, "unauthorized")
	})

	t.Run("NoExpiry", func(t *testing.T) {
		for _, body := range []string{`{"name": "forever"}`, `{"name": "forever", "expires_at": null}`} {
			resp := postKey(t, e.srv, alice.User.ID, alice.APIKey, body)
			wantStatus(t, resp, http.StatusCreated)
			if !strings.Contains(string(resp.Body), `"expires_at":null`) {
				t.Fatalf("%s: got %s, want expires_at null", body, resp.Body)
			}
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		before := count(t, e.srv, `SELECT count(*) FROM api_keys`)
		for name, v := range map[string]string{
			"Past":      time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
			"DateOnly":  time.Now().AddDate(0, 1, 0).Format(time.DateOnly),
			"Words":     "tomorrow",
			"Empty":     "",
			"BadMonth":  "2030-13-01T00:00:00Z",
			"NoZone":    "2030-01-01T00:00:00",
			"Epoch":     "1970-01-01T00:00:00Z",
			"Injection": "2030-01-01T00:00:00Z'; DROP TABLE api_keys; --",
		} {
			resp := postKey(t, e.srv, alice.User.ID, alice.APIKey, map[string]string{"name": "x", "expires_at": v})
			if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_expires_at" {
				t.Errorf("%s: got %d %s, want 400 invalid_expires_at", name, resp.Status, resp.Body)
			}
		}
		resp := postKey(t, e.srv, alice.User.ID, alice.APIKey, `{"name": "x", "expires_at": 1893456000}`)
		wantAPIError(t, resp, http.StatusBadRequest, "invalid_json")
		if after := count(t, e.srv, `SELECT count(*) FROM api_keys`); after != before {
			t.Errorf("keys after refused requests: got %d, want %d", after, before)
		}
	})
}

// TestAPIKeys_SSOMaxTTL: the keys of a single sign-on person expire within the cap, whoever
// asks for them; without expires_at they get the cap, past it the request is refused.
func TestAPIKeys_SSOMaxTTL(t *testing.T) {
	p := oidctest.NewProvider(t)
	srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, func(o *api.Options) { o.SSOAPIKeyMaxTTL = 48 * time.Hour })[0]
	srv.MustClaim(t)
	admin := apitest.MustPerson(t, srv.Store, "admin", store.RoleAdmin)
	session := srv.MustSignInOIDC(t, p, "alice")
	sso := mustMe(t, srv, session)
	within := func(t *testing.T, k keyWithExpiry, want time.Time) {
		t.Helper()
		if k.ExpiresAt == nil || k.ExpiresAt.Sub(want).Abs() > time.Minute {
			t.Fatalf("got expires_at %v, want about %v", k.ExpiresAt, want)
		}
	}

	t.Run("DefaultsToTheCap", func(t *testing.T) {
		within(t, mustCreateKeyAs(t, srv, sso.ID, session, map[string]string{"name": "mine"}), time.Now().Add(48*time.Hour))
		resp := postKey(t, srv, sso.ID, admin.APIKey, map[string]string{"name": "by-admin"})
		wantStatus(t, resp, http.StatusCreated)
		var k keyWithExpiry
		resp.JSON(t, &k)
		within(t, k, time.Now().Add(48*time.Hour))
	})

	t.Run("Earlier", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		k := mustCreateKeyAs(t, srv, sso.ID, session, map[string]string{"name": "soon", "expires_at": at.Format(time.RFC3339)})
		if k.ExpiresAt == nil || !k.ExpiresAt.Equal(at) {
			t.Fatalf("got expires_at %v, want %v", k.ExpiresAt, at)
		}
	})

	t.Run("ErrTooLate", func(t *testing.T) {
		before := count(t, srv, `SELECT count(*) FROM api_keys`)
		late := time.Now().Add(72 * time.Hour).UTC().Format(time.RFC3339)
		for _, c := range []apitest.Request{
			{Cookie: session}, {Bearer: admin.APIKey},
		} {
			c.Method, c.Path, c.Body = http.MethodPost, userURL(sso.ID, "/api-keys"), map[string]string{"name": "late", "expires_at": late}
			resp := srv.MustDo(t, c)
			wantAPIError(t, resp, http.StatusBadRequest, "expires_at_too_late")
			if !strings.Contains(string(resp.Body), "2 days") {
				t.Errorf("got %s, want the message to say how long keys may live (2 days)", resp.Body)
			}
		}
		if after := count(t, srv, `SELECT count(*) FROM api_keys`); after != before {
			t.Errorf("keys after refused requests: got %d, want %d", after, before)
		}
		// A password user's keys are not capped.
		resp := postKey(t, srv, admin.User.ID, admin.APIKey, map[string]string{"name": "late", "expires_at": late})
		wantStatus(t, resp, http.StatusCreated)
	})
}

func TestAPIKeys_PerUserLimit(t *testing.T) {
	t.Run("Default", func(t *testing.T) {
		e := newCoreEnv(t, nil)
		// alice holds one key already; give her 98 more, then the API takes her to 100.
		if _, err := e.srv.Store.Pool().Exec(t.Context(), `INSERT INTO api_keys (user_id, name, key_hash)
			SELECT $1, 'bulk', sha256(('bulk' || g)::bytea) FROM generate_series(1, 98) g`, e.alice.User.ID); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, postKey(t, e.srv, e.alice.User.ID, e.alice.APIKey, map[string]string{"name": "100th"}), http.StatusCreated)
		wantAPIError(t, postKey(t, e.srv, e.alice.User.ID, e.alice.APIKey, map[string]string{"name": "101st"}),
			http.StatusConflict, "too_many_api_keys")
		// An admin cannot push her past it either; bob is not affected.
		wantAPIError(t, postKey(t, e.srv, e.alice.User.ID, e.admin.APIKey, map[string]string{"name": "101st"}),
			http.StatusConflict, "too_many_api_keys")
		wantStatus(t, postKey(t, e.srv, e.bob.User.ID, e.bob.APIKey, map[string]string{"name": "bobs"}), http.StatusCreated)
	})

	t.Run("RevokedAndExpiredDoNotCount", func(t *testing.T) {
		e := newCoreEnv(t, func(o *api.Options) { o.APIKeysPerUser = 2 })
		k := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "second")
		wantAPIError(t, postKey(t, e.srv, e.alice.User.ID, e.alice.APIKey, map[string]string{"name": "third"}),
			http.StatusConflict, "too_many_api_keys")
		wantStatus(t, e.do(t, apitest.Request{Method: http.MethodDelete, Bearer: e.alice.APIKey,
			Path: userURL(e.alice.User.ID, fmt.Sprintf("/api-keys/%d", k.ID))}), http.StatusNoContent)
		k = mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "third")
		if _, err := e.srv.Store.Pool().Exec(t.Context(),
			`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID); err != nil {
			t.Fatal(err)
		}
		mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "fourth")
	})
}

// TestAPIKeys_PerUserLimitRace sends many creates for one person at once through two
// replicas, round after round: exactly as many succeed as the cap leaves room for, the rest
// get 409 too_many_api_keys, and the database never holds more live keys than the cap.
func TestAPIKeys_PerUserLimitRace(t *testing.T) {
	const limit, creates, rounds = 5, 24, 8
	dbURL := pgtest.MustDatabase(t)
	replicas := make([]*apitest.Server, 2)
	for i := range replicas {
		replicas[i] = apitest.NewServer(t, dbURL, func(o *api.Options) { o.APIKeysPerUser = limit })
	}
	replicas[0].MustClaim(t)
	for round := range rounds {
		// A new person each round, holding one key already (MustPerson's).
		person := apitest.MustPerson(t, replicas[0].Store, fmt.Sprintf("racer-%d", round), store.RoleMember)
		statuses := make([]int, creates)
		codes := make([]string, creates)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range creates {
			wg.Go(func() {
				<-start
				resp, err := replicas[i%2].Do(apitest.Request{Method: http.MethodPost, Bearer: person.APIKey,
					Path: userURL(person.User.ID, "/api-keys"), Body: map[string]string{"name": fmt.Sprintf("k%d", i)}})
				if err != nil {
					t.Errorf("round %d, create %d: %v", round, i, err)
					return
				}
				statuses[i], codes[i] = resp.Status, resp.Code()
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i, status := range statuses {
			switch {
			case status == http.StatusCreated:
				created++
			case status != http.StatusConflict || codes[i] != "too_many_api_keys":
				t.Fatalf("round %d, create %d: got %d %s, want 201 or 409 too_many_api_keys", round, i, status, codes[i])
			}
		}
		if created != limit-1 {
			t.Fatalf("round %d: got %d keys created, want %d (the cap of %d, less the key held)", round, created, limit-1, limit)
		}
		if n := count(t, replicas[0], `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL`,
			person.User.ID); n != limit {
			t.Fatalf("round %d: live keys in the database: got %d, want %d", round, n, limit)
		}
	}
}
