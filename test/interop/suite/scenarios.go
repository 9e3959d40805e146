package suite

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// Run runs every scenario against p, each on instances of its own over a fresh database.
// p is shared, so each scenario has people of its own; login turns a person's name into what
// they sign in with at p (Person.Login).
func Run(t *testing.T, p Product, login func(name string) string) {
	person := func(name string, groups ...string) Person {
		return Person{Login: login(name), Username: name, Email: name + "@example.test", EmailVerified: true, Groups: groups}
	}
	t.Run("Gate", func(t *testing.T) { gate(t, p, person("ada", Users, Admins), person("bo", Users)) })
	t.Run("Groups", func(t *testing.T) {
		groups(t, p, person("ana", Users, Admins), person("ben", Users), person("cy", Contractors))
	})
	t.Run("GroupsChange", func(t *testing.T) { groupsChange(t, p, person("dee", Users, Admins)) })
	t.Run("GroupsDropped", func(t *testing.T) { groupsDropped(t, p, person("gus", Users, Admins), person("nell")) })
	t.Run("Renamed", func(t *testing.T) { renamed(t, p, person("rita", Users)) })
	t.Run("SecondSignIn", func(t *testing.T) { secondSignIn(t, p, person("sam", Users)) })
	t.Run("Email", func(t *testing.T) {
		unverified := person("nora", Users)
		unverified.EmailVerified = false
		noName := person("vic", Users)
		noName.Username = ""
		email(t, p, person("vera", Users), unverified, noName)
	})
	t.Run("KeyRotation", func(t *testing.T) { keyRotation(t, p, person("kai", Users), person("kim", Users)) })
	t.Run("StepUp", func(t *testing.T) { stepUp(t, p, person("stu", Users)) })
}

// stepUp: the product says when the person authenticated (auth_time), so the session of a
// sign-in where they just did makes an API key; the step-up sign-in asks the product for a
// new authentication (max_age=0, prompt=login), and the product answers it with an auth_time
// the callback accepts, whose session makes a key too.
func stepUp(t *testing.T, p Product, who Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, who)
	me, c := MustSignIn(t, srv.Gated, p, who.Login)
	MustCreateKey(t, srv.Gated, me.ID, c)

	f, err := srv.Gated.StartOIDCStepUp(t.Context(), p, who.Login)
	if err != nil {
		t.Fatal(err)
	}
	if q := mustParse(t, f.AuthURL).Query(); q.Get("max_age") != "0" || q.Get("prompt") != "login" {
		t.Errorf("step-up authorization request: got max_age=%q prompt=%q, want 0 and login", q.Get("max_age"), q.Get("prompt"))
	}
	resp, err := srv.Gated.FinishOIDC(f)
	if err != nil {
		t.Fatal(err)
	}
	c = resp.Cookie("terdut_session")
	if resp.Status != http.StatusSeeOther || c == nil {
		t.Fatalf("step-up callback: got %d %s, want 303 with a session", resp.Status, resp.Body)
	}
	MustCreateKey(t, srv.Gated, me.ID, c)
}

// gate: while the install is pending no sign-in the product made succeeds, neither a start
// nor the callback of a flow the product completed; after the claim every one does.
func gate(t *testing.T, p Product, admin, member Person) {
	srv := NewServers(t, p, nil)
	p.SetPerson(t, admin)
	p.SetPerson(t, member)
	start := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login?login_hint=" + admin.Login})
	if start.Status != http.StatusServiceUnavailable || start.Code() != "bootstrap_pending" || len(start.Cookies) != 0 {
		t.Errorf("login start while pending: got %d %s with %d cookies, want 503 bootstrap_pending and none",
			start.Status, start.Body, len(start.Cookies))
	}
	for _, who := range []Person{admin, member} {
		f := srv.Starter.MustStartOIDC(t, p, who.Login) // the product signed them in
		resp, err := srv.Gated.FinishOIDC(f)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" || resp.Cookie("terdut_session") != nil {
			t.Errorf("%s's callback while pending: got %d %s, want 503 bootstrap_pending and no session", who.Username, resp.Status, resp.Body)
		}
	}
	if n := Count(t, srv.Gated, `SELECT count(*) FROM users`) + Count(t, srv.Gated, `SELECT count(*) FROM sessions`); n != 0 {
		t.Errorf("users and sessions while pending: got %d, want 0", n)
	}

	srv.Gated.MustClaim(t)
	if me, _ := MustSignIn(t, srv.Gated, p, admin.Login); me.Username != admin.Username || me.Role != store.RoleAdmin || !me.SSO {
		t.Errorf("%s after the claim: got %+v, want an SSO admin", admin.Username, me)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, member.Login); me.Username != member.Username || me.Role != store.RoleMember {
		t.Errorf("%s after the claim: got %+v, want a member", member.Username, me)
	}
}

// groups: the admitted group signs in as a member, the admin group as an admin, any other
// group is refused and leaves no user behind.
func groups(t *testing.T, p Product, admin, member, outsider Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	for _, who := range []Person{admin, member, outsider} {
		p.SetPerson(t, who)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, admin.Login); me.Role != store.RoleAdmin || me.Username != admin.Username || me.Email != admin.Email {
		t.Errorf("%s: got %+v, want an admin with their e-mail", admin.Username, me)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, member.Login); me.Role != store.RoleMember || me.Username != member.Username {
		t.Errorf("%s: got %+v, want a member", member.Username, me)
	}
	resp := SignIn(t, srv.Gated, p, outsider.Login)
	if resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" || resp.Cookie("terdut_session") != nil {
		t.Errorf("%s in %v: got %d %s, want 403 group_not_allowed", outsider.Username, outsider.Groups, resp.Status, resp.Body)
	}
	if n := Count(t, srv.Gated, `SELECT count(*) FROM users WHERE username = $1`, outsider.Username); n != 0 {
		t.Errorf("users named %s: got %d, want 0", outsider.Username, n)
	}
}

// groupsChange: a person whose groups change at the product changes role at their next
// sign-in; once out of the admitted group they are refused and lose their sessions.
func groupsChange(t *testing.T, p Product, who Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, who)
	first, _ := MustSignIn(t, srv.Gated, p, who.Login)
	if first.Role != store.RoleAdmin {
		t.Fatalf("first sign-in: got %+v, want an admin", first)
	}

	who.Groups = []string{Users}
	p.SetPerson(t, who)
	second, c := MustSignIn(t, srv.Gated, p, who.Login)
	if second.ID != first.ID || second.Role != store.RoleMember {
		t.Errorf("out of %s: got %+v, want user %d, now a member", Admins, second, first.ID)
	}

	who.Groups = []string{Contractors}
	p.SetPerson(t, who)
	resp := SignIn(t, srv.Gated, p, who.Login)
	if resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
		t.Errorf("out of %s: got %d %s, want 403 group_not_allowed", Users, resp.Status, resp.Body)
	}
	if resp := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c}); resp.Status != http.StatusUnauthorized {
		t.Errorf("their session after the refusal: got %d %s, want 401", resp.Status, resp.Body)
	}
}

// groupsDropped: a person dropped from every group signs in with no groups claim at all (the
// products omit an empty one): having had it, they are refused and disarmed, as for any group
// not allowed: no longer an admin, their session and key answer 401. A person who never had
// one is refused too, and the log warns about the configuration instead.
func groupsDropped(t *testing.T, p Product, who, never Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, who)
	p.SetPerson(t, never)
	first, c := MustSignIn(t, srv.Gated, p, who.Login)
	if first.Role != store.RoleAdmin {
		t.Fatalf("first sign-in: got %+v, want an admin", first)
	}
	resp := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/users/%d/api-keys", first.ID),
		Cookie: c, Body: map[string]string{"name": "laptop"}})
	var key struct{ Key string }
	if resp.Status != http.StatusCreated {
		t.Fatalf("their key: got %d %s, want 201", resp.Status, resp.Body)
	}
	resp.JSON(t, &key)

	who.Groups = nil
	p.SetPerson(t, who)
	if resp := SignIn(t, srv.Gated, p, who.Login); resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
		t.Errorf("out of every group: got %d %s, want 403 group_not_allowed", resp.Status, resp.Body)
	}
	if resp := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c}); resp.Status != http.StatusUnauthorized {
		t.Errorf("their session after the refusal: got %d %s, want 401", resp.Status, resp.Body)
	}
	if resp := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key.Key}); resp.Status != http.StatusUnauthorized {
		t.Errorf("their key after the refusal: got %d %s, want 401", resp.Status, resp.Body)
	}
	if n := Count(t, srv.Gated, `SELECT count(*) FROM users WHERE id = $1 AND role = 'member'`, first.ID); n != 1 {
		t.Errorf("after the refusal: got %d members with their id, want 1", n)
	}
	if logs := srv.Gated.Logs.String(); strings.Contains(logs, "check --oidc-groups-claim") {
		t.Errorf("log after the refusal warns about the configuration: %s", logs)
	}

	if resp := SignIn(t, srv.Gated, p, never.Login); resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
		t.Errorf("%s, never in a group: got %d %s, want 403 group_not_allowed", never.Username, resp.Status, resp.Body)
	}
	if logs := srv.Gated.Logs.String(); !strings.Contains(logs, "check --oidc-groups-claim") || !strings.Contains(logs, `"oidc_groups_claim":"groups"`) {
		t.Errorf("log after %s's refusal: got %s, want the configuration warning", never.Username, logs)
	}
	if n := Count(t, srv.Gated, `SELECT count(*) FROM users WHERE username = $1`, never.Username); n != 0 {
		t.Errorf("users named %s: got %d, want 0", never.Username, n)
	}
}

// renamed: a person renamed at the product keeps their user here, under the new name.
func renamed(t *testing.T, p Product, who Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, who)
	first, _ := MustSignIn(t, srv.Gated, p, who.Login)
	who.Username += "-renamed"
	p.SetPerson(t, who)
	second, _ := MustSignIn(t, srv.Gated, p, who.Login)
	if second.ID != first.ID || second.Username != who.Username {
		t.Errorf("after the rename: got %+v, want user %d named %s", second, first.ID, who.Username)
	}
}

// secondSignIn: the same person signing in again is the same user, with a second session.
func secondSignIn(t *testing.T, p Product, who Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, who)
	first, c1 := MustSignIn(t, srv.Gated, p, who.Login)
	second, c2 := MustSignIn(t, srv.Gated, p, who.Login)
	if second != first || c1.Value == c2.Value {
		t.Errorf("second sign-in: got %+v, want %+v with a new session", second, first)
	}
	if n := Count(t, srv.Gated, `SELECT count(*) FROM users WHERE oidc_subject IS NOT NULL`); n != 1 {
		t.Errorf("SSO users: got %d, want 1", n)
	}
}

// email: a verified e-mail is kept, an unverified one is not; without a username claim the
// verified e-mail is the username.
func email(t *testing.T, p Product, verified, unverified, noName Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	for _, who := range []Person{verified, unverified, noName} {
		p.SetPerson(t, who)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, verified.Login); me.Email != verified.Email || me.Username != verified.Username {
		t.Errorf("verified: got %+v, want %s with %s", me, verified.Username, verified.Email)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, unverified.Login); me.Email != "" || me.Username != unverified.Username {
		t.Errorf("unverified: got %+v, want %s without an e-mail", me, unverified.Username)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, noName.Login); me.Email != noName.Email || me.Username != noName.Email {
		t.Errorf("no username claim: got %+v, want the verified e-mail %s as username", me, noName.Email)
	}
}

// keyRotation: after the product rotates its signing key, ID tokens signed with the new key
// verify (terdut-server fetches the new key set), for a returning person and a new one.
func keyRotation(t *testing.T, p Product, returning, newcomer Person) {
	srv := NewServers(t, p, nil)
	srv.Gated.MustClaim(t)
	p.SetPerson(t, returning)
	p.SetPerson(t, newcomer)
	first, _ := MustSignIn(t, srv.Gated, p, returning.Login)
	before := p.LastKeyID()
	p.RotateKeys(t)
	if again, _ := MustSignIn(t, srv.Gated, p, returning.Login); again.ID != first.ID {
		t.Errorf("returning after the rotation: got %+v, want user %d", again, first.ID)
	}
	if after := p.LastKeyID(); after == before || after == "" {
		t.Errorf("key of the ID token after the rotation: got %q, want another than %q", after, before)
	}
	if me, _ := MustSignIn(t, srv.Gated, p, newcomer.Login); me.Username != newcomer.Username {
		t.Errorf("new after the rotation: got %+v, want %s", me, newcomer.Username)
	}
}
