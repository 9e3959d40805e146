package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// newGroupReplicas starts two replicas over a fresh, claimed database that admit the group
// "oncall" and make "ops-admins" admins, and returns them with the provider.
func newGroupReplicas(t *testing.T) (a, b *apitest.Server, p *oidctest.Provider) {
	t.Helper()
	p = oidctest.NewProvider(t)
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, p, func(o *api.Options) {
		o.OIDC.AllowedGroups = []string{"oncall"}
		o.OIDC.AdminGroups = []string{"ops-admins"}
	})
	replicas[0].MustClaim(t)
	return replicas[0], replicas[1], p
}

// mustCreateKeyAs creates a key for the user with the given credentials and returns its secret.
func mustCreateKeyAs(t *testing.T, srv *apitest.Server, userID int64, c *http.Cookie, body any) keyWithExpiry {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(userID, "/api-keys"), Cookie: c, Body: body})
	wantStatus(t, resp, http.StatusCreated)
	var k keyWithExpiry
	resp.JSON(t, &k)
	return k
}

// createUser is an admin's act: POST /api/users with the key.
func createUser(t *testing.T, srv *apitest.Server, key, username string) apitest.Response {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key,
		Body: map[string]string{"username": username, "email": username + "@example.test"}})
}

// TestDeprovision_NotAdmitted is the reviewer's scenario: an SSO admin makes a key, is then
// removed from every allowed group, and their next sign-in is refused. From then on the key
// (and the session) answer 401 on every replica, so it can no longer create an admin.
func TestDeprovision_NotAdmitted(t *testing.T) {
	a, b, p := newGroupReplicas(t)
	p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", Email: "ada@example.test",
		Groups: []string{"oncall", "ops-admins"}})
	session := a.MustSignInOIDC(t, p, "sub-ada")
	ada := mustMe(t, a, session)
	if ada.Role != store.RoleAdmin {
		t.Fatalf("ada: got %+v, want an admin", ada)
	}
	key := mustCreateKeyAs(t, a, ada.ID, session, map[string]string{"name": "laptop"})
	wantStatus(t, createUser(t, b, key.Key, "made-by-ada"), http.StatusCreated)

	// The provider removes ada from every allowed group.
	p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", Email: "ada@example.test",
		Groups: []string{"contractors"}})
	resp, err := b.SignInOIDC(t.Context(), p, "sub-ada")
	if err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, resp, http.StatusForbidden, "group_not_allowed")
	if resp.Cookie("terdut_session") != nil {
		t.Errorf("the refused sign-in set a session cookie")
	}

	for i, srv := range []*apitest.Server{a, b} {
		wantAPIError(t, createUser(t, srv, key.Key, "made-after-removal"), http.StatusUnauthorized, "unauthorized")
		me := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key.Key})
		if me.Status != http.StatusUnauthorized {
			t.Errorf("GET /api/me with ada's key on replica %d: got %d %s, want 401", i, me.Status, me.Body)
		}
	}
	mustSignedOut(t, []*apitest.Server{a, b}, session)

	// The account stays, as a member, and nothing of anyone else's changed.
	if n := count(t, a, `SELECT count(*) FROM users WHERE id = $1 AND role = 'member'`, ada.ID); n != 1 {
		t.Errorf("ada after the refusal: got %d members with her id, want 1", n)
	}
	if n := count(t, a, `SELECT count(*) FROM users WHERE username = 'made-after-removal'`); n != 0 {
		t.Errorf("users created with the old key: got %d, want 0", n)
	}
	logs := b.Logs.String()
	if !strings.Contains(logs, `"msg":"single sign-on refused this person for their groups: revoked their sessions and API keys"`) ||
		!strings.Contains(logs, `"revoked_api_keys":1`) || !strings.Contains(logs, `"revoked_sessions":1`) {
		t.Errorf("replica b's log: got %s, want the revocation with its counts", logs)
	}
	if strings.Contains(logs, key.Key) || strings.Contains(logs, session.Value) {
		t.Errorf("replica b's log holds a secret: %s", logs)
	}

	// Admitted again, ada signs in as the provider's groups say; the old key stays dead.
	p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", Groups: []string{"oncall"}})
	if got := mustMe(t, b, b.MustSignInOIDC(t, p, "sub-ada")); got.ID != ada.ID || got.Role != store.RoleMember {
		t.Errorf("ada readmitted: got %+v, want user %d as a member", got, ada.ID)
	}
	if _, status := whoAmIOn(t, a, key.Key); status != http.StatusUnauthorized {
		t.Errorf("the old key after ada was readmitted: got %d, want 401", status)
	}
}

// TestDeprovision_AdminGroupRemoved: a person who loses only the admin group signs in as a
// member, and their keys act as a member from then on.
func TestDeprovision_AdminGroupRemoved(t *testing.T) {
	a, b, p := newGroupReplicas(t)
	p.AddUser(oidctest.User{Subject: "sub-max", PreferredUsername: "max", Groups: []string{"oncall", "ops-admins"}})
	session := a.MustSignInOIDC(t, p, "sub-max")
	maxID := mustMe(t, a, session).ID
	key := mustCreateKeyAs(t, a, maxID, session, map[string]string{"name": "ci"})
	wantStatus(t, createUser(t, b, key.Key, "made-as-admin"), http.StatusCreated)

	p.AddUser(oidctest.User{Subject: "sub-max", PreferredUsername: "max", Groups: []string{"oncall"}})
	if got := mustMe(t, b, b.MustSignInOIDC(t, p, "sub-max")); got.ID != maxID || got.Role != store.RoleMember {
		t.Fatalf("max without the admin group: got %+v, want user %d as a member", got, maxID)
	}
	for i, srv := range []*apitest.Server{a, b} {
		if id, status := whoAmIOn(t, srv, key.Key); id != maxID {
			t.Fatalf("max's key on replica %d: got user %d (status %d), want %d", i, id, status, maxID)
		}
		wantAPIError(t, createUser(t, srv, key.Key, "made-as-member"), http.StatusForbidden, "forbidden")
		wantRoster(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: key.Key}))
	}
	if got := mustMe(t, a, session); got.Role != store.RoleMember {
		t.Errorf("max's earlier session: got %+v, want a member", got)
	}
}

// whoAmIOn returns the id of the user the key authenticates on srv, or 0 with the status.
func whoAmIOn(t *testing.T, srv *apitest.Server, key string) (int64, int) {
	t.Helper()
	return whoAmI(t, coreEnv{srv: srv}, key)
}

// keyWithExpiry is a key as the API shows it, with its expiry.
type keyWithExpiry struct {
	ID        int64      `json:"id"`
	UserID    int64      `json:"user_id"`
	Key       string     `json:"key"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// TestDeprovision_GroupsClaimAbsent: providers omit an empty groups claim (Dex's groups is
// omitempty), so a person who has had the claim and signs in without it was dropped from every
// group: refused and disarmed, as for any group not allowed. A person who never had it (a
// scope not granted, a misspelt --oidc-groups-claim) is refused too, but keeps their role,
// keys and sessions, and the log names the setting to check.
func TestDeprovision_GroupsClaimAbsent(t *testing.T) {
	signInRefused := func(t *testing.T, srv *apitest.Server, p *oidctest.Provider, subject string) {
		t.Helper()
		resp, err := srv.SignInOIDC(t.Context(), p, subject)
		if err != nil {
			t.Fatal(err)
		}
		wantAPIError(t, resp, http.StatusForbidden, "group_not_allowed")
		if resp.Cookie("terdut_session") != nil {
			t.Errorf("the refused sign-in set a session cookie")
		}
	}
	// adminWithKey signs an admin in on a, and makes them a key with that session.
	adminWithKey := func(t *testing.T, a *apitest.Server, p *oidctest.Provider, name string) (me, *http.Cookie, keyWithExpiry) {
		t.Helper()
		p.AddUser(oidctest.User{Subject: "sub-" + name, PreferredUsername: name, Groups: []string{"oncall", "ops-admins"}})
		session := a.MustSignInOIDC(t, p, "sub-"+name)
		u := mustMe(t, a, session)
		return u, session, mustCreateKeyAs(t, a, u.ID, session, map[string]string{"name": "laptop"})
	}

	t.Run("HadOne", func(t *testing.T) {
		a, b, p := newGroupReplicas(t)
		ada, session, key := adminWithKey(t, a, p, "ada")

		// Dropped from every group: the provider sends no groups claim at all.
		p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", ExtraClaims: map[string]any{"groups": nil}})
		signInRefused(t, b, p, "sub-ada")

		mustSignedOut(t, []*apitest.Server{a, b}, session)
		for i, srv := range []*apitest.Server{a, b} {
			if _, status := whoAmIOn(t, srv, key.Key); status != http.StatusUnauthorized {
				t.Errorf("ada's key on replica %d: got %d, want 401", i, status)
			}
		}
		if n := count(t, a, `SELECT count(*) FROM users WHERE id = $1 AND role = 'member'`, ada.ID); n != 1 {
			t.Errorf("ada after the refusal: got %d members with her id, want 1", n)
		}
		logs := b.Logs.String()
		if !strings.Contains(logs, "revoked their sessions and API keys") || strings.Contains(logs, "check --oidc-groups-claim") {
			t.Errorf("replica b's log: got %s, want the revocation and no configuration warning", logs)
		}
	})

	t.Run("NeverHadOne", func(t *testing.T) {
		a, b, p := newGroupReplicas(t)
		bo, session, key := adminWithKey(t, a, p, "bo")

		// bo signed in before the server remembered the groups claim (migration 00011), so it
		// has never seen his; a newcomer has none either. Then the provider sends the groups
		// under a name the server does not read.
		if _, err := a.Store.Pool().Exec(t.Context(), `UPDATE users SET oidc_groups_claim = NULL WHERE id = $1`, bo.ID); err != nil {
			t.Fatal(err)
		}
		p.SetGroupsClaim("roles")
		p.AddUser(oidctest.User{Subject: "sub-new", PreferredUsername: "newcomer", Groups: []string{"oncall"}})
		signInRefused(t, b, p, "sub-bo")
		signInRefused(t, b, p, "sub-new")

		for i, srv := range []*apitest.Server{a, b} {
			if got := mustMe(t, srv, session); got.ID != bo.ID || got.Role != store.RoleAdmin {
				t.Errorf("bo's session on replica %d: got %+v, want user %d, still an admin", i, got, bo.ID)
			}
			if id, status := whoAmIOn(t, srv, key.Key); id != bo.ID {
				t.Errorf("bo's key on replica %d: got user %d (status %d), want %d", i, id, status, bo.ID)
			}
		}
		logs := b.Logs.String()
		if n := strings.Count(logs, `"oidc_groups_claim":"groups"`); n != 2 || !strings.Contains(logs, `"level":"WARN"`) {
			t.Errorf("replica b's log: got %s, want two warnings naming the groups claim setting", logs)
		}
		if strings.Contains(logs, "revoked their sessions") {
			t.Errorf("replica b's log reports a revocation: %s", logs)
		}
		if n := count(t, a, `SELECT count(*) FROM users WHERE username = 'newcomer'`); n != 0 {
			t.Errorf("users named newcomer: got %d, want 0", n)
		}

		// A claim that is present but lists no allowed group still disarms.
		p.SetGroupsClaim("groups")
		p.AddUser(oidctest.User{Subject: "sub-bo", PreferredUsername: "bo", Groups: []string{}})
		signInRefused(t, b, p, "sub-bo")
		mustSignedOut(t, []*apitest.Server{a, b}, session)
	})
}

// TestDeprovision_ClientGone: the client disconnects (its request's context is cancelled) just
// as the refused sign-in starts disarming the person; the revocation still happens.
func TestDeprovision_ClientGone(t *testing.T) {
	a, _, p := newGroupReplicas(t)
	p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", Groups: []string{"oncall", "ops-admins"}})
	session := a.MustSignInOIDC(t, p, "sub-ada")
	ada := mustMe(t, a, session)
	key := mustCreateKeyAs(t, a, ada.ID, session, map[string]string{"name": "laptop"})

	p.AddUser(oidctest.User{Subject: "sub-ada", PreferredUsername: "ada", Groups: []string{"contractors"}})
	flow := a.MustStartOIDC(t, p, "sub-ada")
	// The callback runs in this goroutine on a's database and options, with a store that
	// cancels the request's context as the disarming begins: a client gone at that moment.
	h := api.NewServer(disconnectingStore{a.Store}, a.Options)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(context.WithValue(ctx, disconnectKey{}, cancel), http.MethodGet, flow.Callback.RequestURI(), nil)
	req.AddCookie(flow.StateCookie)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if ctx.Err() == nil {
		t.Fatalf("the callback never started disarming (status %d %s)", rec.Code, rec.Body)
	}
	if rec.Code != http.StatusForbidden {
		t.Errorf("the callback: got %d %s, want 403", rec.Code, rec.Body)
	}
	if id, status := whoAmIOn(t, a, key.Key); status != http.StatusUnauthorized {
		t.Errorf("ada's key after the refusal: got user %d (status %d), want 401", id, status)
	}
	mustSignedOut(t, []*apitest.Server{a}, session)
}

// disconnectKey carries the cancel function of a request's context, for disconnectingStore.
type disconnectKey struct{}

// disconnectingStore is the real store, except that DeprovisionSSOUser first cancels the
// request's context (found under disconnectKey), as a client disconnecting would.
type disconnectingStore struct{ *store.Store }

func (s disconnectingStore) DeprovisionSSOUser(ctx context.Context, issuer, subject, missingGroupsClaim string) (store.Deprovisioned, error) {
	if cancel, ok := ctx.Value(disconnectKey{}).(context.CancelFunc); ok {
		cancel()
	}
	return s.Store.DeprovisionSSOUser(ctx, issuer, subject, missingGroupsClaim)
}
