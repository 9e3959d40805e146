package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// passwordRaceRounds is how many times each race below is run. Before the rules were checked
// again on the locked row, both changes of a round went through within the first few rounds;
// one round in which both do fails the test. In the races that count wins, each side won in
// about a third of the rounds or more, so a race one side always wins (no race at all) fails
// it too.
const passwordRaceRounds = 25

// wins counts the rounds each side of a race won, and fails the test unless both won some
// (said only when no round failed it already).
type wins [2]int

func (w *wins) check(t *testing.T, sides [2]string) {
	t.Helper()
	t.Logf("rounds won: %s %d, %s %d", sides[0], w[0], sides[1], w[1])
	if !t.Failed() && (w[0] == 0 || w[1] == 0) {
		t.Errorf("rounds won: %s %d, %s %d; want both sides to win some, or the two did not race", sides[0], w[0], sides[1], w[1])
	}
}

// raceTwo sends a and b at once, a to replicas[0] and b to replicas[1], and returns both answers.
func raceTwo(t *testing.T, replicas []*apitest.Server, a, b apitest.Request) (apitest.Response, apitest.Response) {
	t.Helper()
	var ra, rb apitest.Response
	var ea, eb error
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { <-start; ra, ea = replicas[0].Do(a) })
	wg.Go(func() { <-start; rb, eb = replicas[1].Do(b) })
	close(start)
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatalf("racing requests: %v, %v", ea, eb)
	}
	return ra, rb
}

// winner returns which of the two racing changes answered 204 (0 or 1), failing the test
// unless exactly one did and the other was refused as the rule in force when it was written
// says: one of losers for the loser at index 0 or 1.
func winner(t *testing.T, round int, answers [2]apitest.Response, losers [2][]string) int {
	t.Helper()
	won := -1
	for i, resp := range answers {
		if resp.Status == http.StatusNoContent {
			if won >= 0 {
				t.Fatalf("round %d: both changes answered 204; the second was decided on a rule that no longer held", round)
			}
			won = i
		}
	}
	if won < 0 {
		t.Fatalf("round %d: no change answered 204: %d %s, %d %s", round, answers[0].Status, answers[0].Body,
			answers[1].Status, answers[1].Body)
	}
	lost := answers[1-won]
	for _, code := range losers[1-won] {
		if lost.Code() == code || code == "unauthorized" && lost.Status == http.StatusUnauthorized {
			return won
		}
	}
	t.Fatalf("round %d: the losing change answered %d %s, want one of %v", round, lost.Status, lost.Body, losers[1-won])
	return won
}

// passwordRace is a race of two requests that each set one person's password, of which
// exactly one must win. round makes a round's person and returns their id, the password each
// side chooses and the two requests that choose them.
type passwordRace struct {
	sides  [2]string   // the sides' names, for the count of rounds won
	losers [2][]string // the codes a side may lose with
	round  func(round int) (userID int64, chosen [2]string, requests [2]apitest.Request)
}

// runPasswordRace runs passwordRaceRounds rounds of race on two replicas: in each, exactly one
// side must win, the loser be refused with one of its codes, and the stored password be the
// winner's; and each side must win some rounds.
func runPasswordRace(t *testing.T, replicas []*apitest.Server, race passwordRace) {
	t.Helper()
	var w wins
	defer w.check(t, race.sides)
	for round := range passwordRaceRounds {
		userID, chosen, reqs := race.round(round)
		a, b := raceTwo(t, replicas, reqs[0], reqs[1])
		won := winner(t, round, [2]apitest.Response{a, b}, race.losers)
		w[won]++
		wantPassword(t, replicas[0], round, userID, chosen[won])
	}
}

// setPasswordRequest is PUT /api/users/{id}/password choosing password, with an API key or a session,
// and current, the caller's current password, unless it is "".
func setPasswordRequest(userID int64, bearer string, session *http.Cookie, password, current string) apitest.Request {
	body := map[string]any{"password": password}
	if current != "" {
		body["current_password"] = current
	}
	return apitest.Request{Method: http.MethodPut, Path: userURL(userID, "/password"), Bearer: bearer, Cookie: session, Body: body}
}

// redeemLinkRequest is POST /api/password-link choosing password with the link's token.
func redeemLinkRequest(token, password string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: "/api/password-link",
		Body: map[string]any{"token": token, "password": password}}
}

// wantPassword fails the test unless the user's stored password is want.
func wantPassword(t *testing.T, srv *apitest.Server, round int, userID int64, want string) {
	t.Helper()
	hash, err := srv.Store.PasswordHash(t.Context(), userID)
	if err != nil {
		t.Fatalf("round %d: read the password: %v", round, err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(want)) != nil {
		t.Fatalf("round %d: the stored password is not the one the winning change set (%q)", round, want)
	}
}

// mustPersonAtAnotherCost makes a member whose password is stored at a bcrypt cost other
// than the server's, as after --password-hash-cost changed: their next sign-in stores it again.
func mustPersonAtAnotherCost(t *testing.T, srv *apitest.Server, username string) apitest.Person {
	t.Helper()
	p := apitest.MustPerson(t, srv.Store, username, store.RoleMember)
	other, err := bcrypt.GenerateFromPassword([]byte(p.Password), bcrypt.MinCost+1)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.SetPasswordHash(t.Context(), p.User.ID, string(other), ""); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustPersonWithoutPassword makes a person who has no password yet, and an API key of theirs,
// used once: a key's first use also records it, a write that would hold its first request
// back in a race.
func mustPersonWithoutPassword(t *testing.T, srv *apitest.Server, username string, role store.Role) (store.User, string) {
	t.Helper()
	u, err := srv.Store.CreateUser(t.Context(), store.NewUser{Username: username, Email: username + "@example.test", Role: role})
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := srv.Store.CreateAPIKey(t.Context(), u.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key}), http.StatusOK)
	return u, key
}

// replacingStore is the real store, except that the first CreatePasswordSession or
// ChangePassword first stores hash as the person's password: a change, or a sign-in elsewhere
// storing the same password at another cost, that commits between a request's check of the
// password and its write. With reset, the operator also reopens the claim then.
type replacingStore struct {
	*store.Store
	hash  string
	reset bool
	done  atomic.Bool
}

func (s *replacingStore) replaceOnce(ctx context.Context, userID int64) error {
	if s.done.Swap(true) {
		return nil
	}
	if err := s.Store.SetPasswordHash(ctx, userID, s.hash, ""); err != nil {
		return err
	}
	if s.reset {
		_, err := s.Store.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{})
		return err
	}
	return nil
}

func (s *replacingStore) CreatePasswordSession(ctx context.Context, userID int64, checkedHash string, a store.Attempt,
	ttl time.Duration, gate store.Gate) (store.Session, error) {
	if err := s.replaceOnce(ctx, userID); err != nil {
		return store.Session{}, err
	}
	return s.Store.CreatePasswordSession(ctx, userID, checkedHash, a, ttl, gate)
}

func (s *replacingStore) ChangePassword(ctx context.Context, c store.PasswordChange) (int64, error) {
	if err := s.replaceOnce(ctx, c.UserID); err != nil {
		return 0, err
	}
	return s.Store.ChangePassword(ctx, c)
}

// serveWithReplacedPassword serves req on srv's database and options through a
// replacingStore that stores password, hashed at a bcrypt cost other than the server's (and
// with reset, reopens the claim), and fails the test unless the request came to the write that it replaces the password before.
func serveWithReplacedPassword(t *testing.T, srv *apitest.Server, password string, reset bool, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost+1)
	if err != nil {
		t.Fatal(err)
	}
	st := &replacingStore{Store: srv.Store, hash: string(hash), reset: reset}
	rec := httptest.NewRecorder()
	api.NewServer(st, srv.Options).ServeHTTP(rec, req)
	if !st.done.Load() {
		t.Fatalf("%s %s answered %d %s before writing: the password was never replaced", req.Method, req.URL.Path,
			rec.Code, rec.Body)
	}
	return rec
}

// wantNothingCounted fails the test unless username's guessing count (login_attempts, keyed by
// a SHA-256 of the lower-cased name) exists, as a check reserved in it makes it, and holds
// neither a failed guess nor a reserved check.
func wantNothingCounted(t *testing.T, srv *apitest.Server, username string) {
	t.Helper()
	const attempts = `SELECT count(*) FROM login_attempts WHERE key = sha256(convert_to(lower($1), 'UTF8'))`
	if got := count(t, srv, attempts, username); got != 1 {
		t.Fatalf("%s's guessing count: %d rows, want the one its check was reserved in", username, got)
	}
	if got := count(t, srv, attempts+` AND (cardinality(attempts) > 0 OR cardinality(pending) > 0)`, username); got != 0 {
		t.Errorf("%s's guessing count: failed guesses or reserved checks left, want none", username)
	}
}

// TestPasswordSet_PasswordReplacedDuringChange: a person's own change whose current password
// is replaced after it was checked. Replaced by another password, the change is refused as a
// wrong current password would be, and the other password stays; replaced by the same password
// at another cost, it goes through. Either way no guess is counted: the current password was
// right when checked. One at a time and in order, where TestPasswordSet_Races
// leaves the order to chance.
func TestPasswordSet_PasswordReplacedDuringChange(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.LoginLimit = store.RateLimit{Max: 5, Window: time.Hour}
	})
	srv.MustClaim(t)
	for _, tc := range []struct {
		name   string
		other  bool // replaced by another password, not the same one
		status int
	}{
		{"ByAnotherPassword", true, http.StatusForbidden},
		{"BySamePasswordAtAnotherCost", false, http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := apitest.MustPerson(t, srv.Store, strings.ToLower(tc.name), store.RoleMember)
			chosen, meanwhile := "the-new-password-of-"+p.User.Username, p.Password
			stays := chosen
			if tc.other {
				meanwhile = "another-password-of-" + p.User.Username
				stays = meanwhile
			}
			req := httptest.NewRequest(http.MethodPut, userURL(p.User.ID, "/password"), strings.NewReader(
				fmt.Sprintf(`{"password":%q,"current_password":%q}`, chosen, p.Password)))
			req.Header.Set("Authorization", "Bearer "+p.APIKey)
			rec := serveWithReplacedPassword(t, srv, meanwhile, false, req)
			if rec.Code != tc.status || tc.other && !strings.Contains(rec.Body.String(), `"wrong_current_password"`) {
				t.Fatalf("the change: got %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			wantPassword(t, srv, 0, p.User.ID, stays)
			wantNothingCounted(t, srv, p.User.Username)
		})
	}
}

// TestPasswordSet_Races: PUT /api/users/{id}/password decides on a read of the person (their
// role, whether they have a password, the hash the caller proved to know), then hashes the new
// password, then writes it. What it decided on is checked again on the person's row, locked,
// when it writes, so no change goes through on a rule that stopped holding meanwhile. Each
// race runs passwordRaceRounds times, its two sides on two replicas over one database.
func TestPasswordSet_Races(t *testing.T) {
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, oidctest.NewProvider(t), nil)
	replicas[0].MustClaim(t)
	root := apitest.MustPerson(t, replicas[0].Store, "root", store.RoleAdmin)

	// An admin with no password yet redeems her set-password link while another admin's API
	// key chooses a password for her. Whichever commits first, the other finds an admin with
	// a password: hers to change (the key), or no link left (the change deletes it).
	t.Run("KeyAgainstLinkOfAdmin", func(t *testing.T) {
		runPasswordRace(t, replicas, passwordRace{sides: [2]string{"the key", "the link"},
			losers: [2][]string{{"admin_password_theirs"}, {"invalid_password_link", "admin_password_theirs"}},
			round: func(round int) (int64, [2]string, [2]apitest.Request) {
				nova, err := replicas[0].Store.CreateUser(t.Context(), store.NewUser{Username: fmt.Sprintf("nova-%02d", round),
					Email: fmt.Sprintf("nova-%02d@example.test", round), Role: store.RoleAdmin})
				if err != nil {
					t.Fatal(err)
				}
				l := mustPasswordLink(t, replicas[0], nova.ID, root.APIKey)
				chosen := [2]string{fmt.Sprintf("root-chose-%02d-for-nova", round), fmt.Sprintf("nova-chose-%02d-herself", round)}
				return nova.ID, chosen, [2]apitest.Request{setPasswordRequest(nova.ID, root.APIKey, nil, chosen[0], ""), redeemLinkRequest(l.Token, chosen[1])}
			}})
	})

	// A person changes their own password from two sessions at once, each with the password
	// both knew. Whichever commits first, the other's current password is no longer current
	// (or its session ended with the change).
	t.Run("OwnChangesFromTwoSessions", func(t *testing.T) {
		loser := []string{"wrong_current_password", "unauthorized"}
		runPasswordRace(t, replicas, passwordRace{sides: [2]string{"replica 0", "replica 1"}, losers: [2][]string{loser, loser},
			round: func(round int) (int64, [2]string, [2]apitest.Request) {
				pat := apitest.MustPerson(t, replicas[0].Store, fmt.Sprintf("pat-%02d", round), store.RoleMember)
				sessions := [2]*http.Cookie{replicas[0].MustLogin(t, pat.User.Username, pat.Password),
					replicas[1].MustLogin(t, pat.User.Username, pat.Password)}
				chosen := [2]string{fmt.Sprintf("pat-%02d-chose-first", round), fmt.Sprintf("pat-%02d-chose-second", round)}
				return pat.User.ID, chosen, [2]apitest.Request{setPasswordRequest(pat.User.ID, "", sessions[0], chosen[0], pat.Password),
					setPasswordRequest(pat.User.ID, "", sessions[1], chosen[1], pat.Password)}
			}})
	})

	// An admin with no password yet chooses her first one, with her own API key (no current
	// password to send), while another admin's key chooses one for her. Whichever commits
	// first, the other finds an admin with a password: hers to change, and for her own change
	// a password she never proved to know.
	t.Run("OwnFirstPasswordAgainstKey", func(t *testing.T) {
		runPasswordRace(t, replicas, passwordRace{sides: [2]string{"her key", "root's key"},
			losers: [2][]string{{"wrong_current_password"}, {"admin_password_theirs"}},
			round: func(round int) (int64, [2]string, [2]apitest.Request) {
				ivy, key := mustPersonWithoutPassword(t, replicas[0], fmt.Sprintf("ivy-%02d", round), store.RoleAdmin)
				chosen := [2]string{fmt.Sprintf("ivy-chose-%02d-herself", round), fmt.Sprintf("root-chose-%02d-for-ivy", round)}
				return ivy.ID, chosen, [2]apitest.Request{setPasswordRequest(ivy.ID, key, nil, chosen[0], ""), setPasswordRequest(ivy.ID, root.APIKey, nil, chosen[1], "")}
			}})
	})

	// A member with no password yet chooses their first one with their own API key while
	// their set-password link is used. Whichever commits first, the other finds a password
	// there: one the member never proved to know, or no link left (the change deletes it).
	t.Run("OwnFirstPasswordAgainstLink", func(t *testing.T) {
		runPasswordRace(t, replicas, passwordRace{sides: [2]string{"their key", "the link"},
			losers: [2][]string{{"wrong_current_password"}, {"invalid_password_link"}},
			round: func(round int) (int64, [2]string, [2]apitest.Request) {
				mo, key := mustPersonWithoutPassword(t, replicas[0], fmt.Sprintf("mo-%02d", round), store.RoleMember)
				l := mustPasswordLink(t, replicas[0], mo.ID, root.APIKey)
				chosen := [2]string{fmt.Sprintf("mo-%02d-chose-by-key", round), fmt.Sprintf("mo-%02d-chose-by-link", round)}
				return mo.ID, chosen, [2]apitest.Request{setPasswordRequest(mo.ID, key, nil, chosen[0], ""), redeemLinkRequest(l.Token, chosen[1])}
			}})
	})

	// A person changes their own password, with an API key, while one of their sign-ins
	// stores the same password at the server's cost (--password-hash-cost changed since it
	// was set). The password stays the same, so the change goes through every time.
	t.Run("OwnChangeAgainstRehashingSignIn", func(t *testing.T) {
		signedInFirst := 0
		for round := range passwordRaceRounds {
			lee := mustPersonAtAnotherCost(t, replicas[0], fmt.Sprintf("lee-%02d", round))
			chosen := fmt.Sprintf("lee-%02d-chose-this", round)
			change, signIn := raceTwo(t, replicas,
				apitest.Request{Method: http.MethodPut, Path: userURL(lee.User.ID, "/password"), Bearer: lee.APIKey,
					Body: map[string]any{"password": chosen, "current_password": lee.Password}},
				apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": lee.User.Username, "password": lee.Password}})
			if change.Status != http.StatusNoContent {
				t.Fatalf("round %d: the change answered %d %s, want 204: its current password stayed current", round,
					change.Status, change.Body)
			}
			// The sign-in went through, and stored its hash, when it came first (its check is
			// done long before the change has hashed the new password); else it met the new
			// password.
			switch signIn.Status {
			case http.StatusOK:
				signedInFirst++
			case http.StatusUnauthorized:
			default:
				t.Fatalf("round %d: the sign-in answered %d %s, want 200 or 401", round, signIn.Status, signIn.Body)
			}
			wantPassword(t, replicas[0], round, lee.User.ID, chosen)
		}
		if signedInFirst == 0 {
			t.Errorf("the sign-in came first in none of %d rounds: it never replaced the hash under a change", passwordRaceRounds)
		}
	})
}

// TestSignIn_RacesRehash: sign-ins of one person at once, on two replicas, after
// --password-hash-cost changed: the first to finish stores the same password at the new
// cost, a new hash, while the others have checked theirs against the old one. Every one of
// them signs in.
func TestSignIn_RacesRehash(t *testing.T) {
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, oidctest.NewProvider(t), nil)
	replicas[0].MustClaim(t)
	// Someone's failed guess, which every re-check must leave counted.
	wantStatus(t, login(t, replicas[0], "not-kim", "a-wrong-guess", nil), http.StatusUnauthorized)
	const signIns = 6
	for round := range passwordRaceRounds {
		kim := mustPersonAtAnotherCost(t, replicas[0], fmt.Sprintf("kim-%02d", round))
		var wg sync.WaitGroup
		statuses := make([]int, signIns)
		start := make(chan struct{})
		for i := range signIns {
			wg.Go(func() {
				<-start
				resp, err := replicas[i%2].Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": kim.User.Username, "password": kim.Password}})
				if err != nil {
					t.Errorf("round %d, sign-in %d: %v", round, i, err)
					return
				}
				statuses[i] = resp.Status
			})
		}
		close(start)
		wg.Wait()
		for i, status := range statuses {
			if status != http.StatusOK {
				t.Fatalf("round %d: sign-in %d answered %d, want 200 from all %d: the password stayed the same", round, i,
					status, signIns)
			}
		}
		wantPassword(t, replicas[0], round, kim.User.ID, kim.Password)
	}
	if n := count(t, replicas[0], `SELECT count(*) FROM login_attempts WHERE cardinality(attempts) = 1`); n != 1 {
		t.Errorf("usernames with a failed guess counted after the rounds: got %d, want 1 (not-kim's)", n)
	}
}
