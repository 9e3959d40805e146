package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// person is someone using the install, with their browser, a session and an API key.
type person struct {
	name    string
	browser *browser
	user    user
	apiKey  string
	// password is the person's password, which a key made from a password session needs;
	// "" for single sign-on people.
	password string
}

// TestE2E_IncidentReplayed replays the incident that motivated the bootstrap contract: the
// install was claimed, but not by the operator (here, from the CLI, its key thrown away),
// and people have been using it since. The operator's claim is refused with 403, as it was;
// but now one Reconcile recovers the install, and nobody's user, session or key changes.
func TestE2E_IncidentReplayed(t *testing.T) {
	t.Parallel()
	db := pgtest.MustEmptyDatabase(t)
	in := newInstall(t, db)
	in.addPerson("ada", groupOncall, groupAdmins)
	in.addPerson("bob", groupOncall)
	in.addPerson("cy", groupOncall)
	srv := in.start(t, "replica-0")

	// Someone claims the install from the CLI, and its key goes nowhere the operator knows.
	var cli struct {
		APIKey     string `json:"api_key"`
		Generation int64  `json:"generation"`
	}
	out := runCLI(t, map[string]string{}, "bootstrap", "claim", "--database-url", db)
	if err := json.Unmarshal(out, &cli); err != nil || cli.APIKey == "" || cli.Generation != 1 {
		t.Fatalf("bootstrap claim: got %s (%v), want a key at generation 1", out, err)
	}

	// People sign in and go about their work: three by single sign-on (ada is an admin),
	// and dave, whom ada gives a set-password link. Everyone makes an API key; ada makes bob a second,
	// and bob revokes a third.
	people := map[string]*person{}
	for _, name := range []string{"ada", "bob", "cy"} {
		p := &person{name: name, browser: newBrowser(t)}
		p.browser.signIn(t, in, srv, srv, name)
		p.user = p.browser.me(t, srv, "")
		people[name] = p
	}
	ada := people["ada"]
	if ada.user.Role != "admin" || people["bob"].user.Role != "member" {
		t.Fatalf("roles: got ada %s and bob %s, want admin and member", ada.user.Role, people["bob"].user.Role)
	}
	const davePassword = "dave-has-a-long-password"
	dave := &person{name: "dave", browser: newBrowser(t), password: davePassword}
	var created user
	ada.browser.mustJSON(t, srv, request{method: http.MethodPost, target: "/api/users",
		body: map[string]string{"username": "dave", "email": "dave@example.test"}}, http.StatusCreated, &created)
	// From her session, ada gives dave a set-password link, not a password; dave chooses his.
	var link struct{ Token string }
	ada.browser.mustJSON(t, srv, request{method: http.MethodPost, target: fmt.Sprintf("/api/users/%d/password-link", created.ID),
		body: map[string]string{}}, http.StatusCreated, &link)
	dave.browser.mustJSON(t, srv, request{method: http.MethodPost, target: "/api/password-link",
		body: map[string]string{"token": link.Token, "password": davePassword}}, http.StatusNoContent, nil)
	dave.browser.mustJSON(t, srv, request{method: http.MethodPost, target: "/api/auth/login",
		body: map[string]string{"username": "dave", "password": davePassword}}, http.StatusOK, nil)
	dave.user = dave.browser.me(t, srv, "")
	people["dave"] = dave
	for _, p := range people {
		p.apiKey = mustCreateKey(t, p.browser, srv, p.user.ID, "laptop", p.password)
	}
	bob := people["bob"]
	mustCreateKey(t, ada.browser, srv, bob.user.ID, "ci", "")
	var old struct{ ID int64 }
	bob.browser.mustJSON(t, srv, request{method: http.MethodPost, target: fmt.Sprintf("/api/users/%d/api-keys", bob.user.ID),
		body: map[string]string{"name": "old"}}, http.StatusCreated, &old)
	bob.browser.mustJSON(t, srv, request{method: http.MethodDelete,
		target: fmt.Sprintf("/api/users/%d/api-keys/%d", bob.user.ID, old.ID)}, http.StatusNoContent, nil)

	before := takeSnapshot(t, db)
	if len(before.users) != 5 || len(before.keys) != 6 || len(before.sessions) != 4 {
		t.Fatalf("before: got %d users, %d keys, %d sessions, want 5 (4 people and the principal), 6 and 4",
			len(before.users), len(before.keys), len(before.sessions))
	}

	// The operator's first reconcile under the old design: the claim is refused, as it was.
	op := in.operator(t, srv)
	_, err := op.Claim(t.Context())
	var e *client.Error
	if !errors.Is(err, client.ErrAlreadyClaimed) || !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Fatalf("operator claim: got %v, want 403 matching ErrAlreadyClaimed", err)
	}

	// Under the new one, the reconcile recovers the install.
	res, err := op.Reconcile(t.Context(), "")
	if err != nil || res.Action != client.ActionResetAndClaimed || res.Generation != 2 || res.RevokedAPIKeys != 1 {
		t.Fatalf("reconcile: got %+v, %v, want reset_and_claimed at generation 2, the CLI's key revoked", res, err)
	}
	anon := newBrowser(t)
	if u := anon.me(t, srv, res.APIKey.Key); u.Username != store.PrincipalUsername || u.Kind != "service" {
		t.Errorf("the operator's new key: got %+v, want the bootstrap principal", u)
	}
	if r := anon.do(t, srv, request{target: "/api/me", bearer: cli.APIKey}); r.status != http.StatusUnauthorized {
		t.Errorf("the CLI's key: got %d, want 401", r.status)
	}

	// Nobody's data changed, and everyone's session and key still work.
	assertUnchanged(t, before, takeSnapshot(t, db))
	for _, p := range people {
		if u := p.browser.me(t, srv, ""); u.ID != p.user.ID {
			t.Errorf("%s's session: got %+v, want %+v", p.name, u, p.user)
		}
		if u := anon.me(t, srv, p.apiKey); u.ID != p.user.ID {
			t.Errorf("%s's API key: got %+v, want %+v", p.name, u, p.user)
		}
	}
	if res, err := op.Reconcile(t.Context(), res.APIKey.Key); err != nil || res.Action != client.ActionNone {
		t.Errorf("the next reconcile: got %+v, %v, want none", res, err)
	}

	srv.stop(t)
	secrets := []string{in.operatorToken, in.idp.ClientSecret, cli.APIKey, res.APIKey.Key, davePassword}
	for _, p := range people {
		secrets = append(secrets, p.apiKey, p.browser.session())
	}
	assertNoSecrets(t, secrets, srv)
}

// mustCreateKey has the browser create an API key for the user and returns its secret. A
// password session sends its person's currentPassword; a single sign-on session, "".
func mustCreateKey(t *testing.T, b *browser, s *server, userID int64, name, currentPassword string) string {
	t.Helper()
	var k struct{ Key string }
	body := map[string]string{"name": name}
	if currentPassword != "" {
		body["current_password"] = currentPassword
	}
	b.mustJSON(t, s, request{method: http.MethodPost, target: fmt.Sprintf("/api/users/%d/api-keys", userID),
		body: body}, http.StatusCreated, &k)
	if k.Key == "" {
		t.Fatalf("create key %q: got no key", name)
	}
	return k.Key
}
