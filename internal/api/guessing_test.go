package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestLogin_ConcurrentGuesses: guesses sent all at once, across two replicas, each reserve
// their check under one lock on the username before the password is checked: at most the
// limit of them are checked (401), every other one is refused (429), and the right password
// sent after them is refused too. A name that does not exist is throttled the same way.
func TestLogin_ConcurrentGuesses(t *testing.T) {
	db := pgtest.MustDatabase(t)
	const limit, guesses = 5, 40
	opts := func(o *api.Options) { o.LoginLimit = store.RateLimit{Max: limit, Window: time.Hour} }
	replicas := []*apitest.Server{apitest.NewServer(t, db, opts), apitest.NewServer(t, db, opts)}
	replicas[0].MustClaim(t)
	for round := range 6 {
		name := fmt.Sprintf("guessed-%d", round)
		p := apitest.MustPerson(t, replicas[0].Store, name, store.RoleMember)
		if round%3 == 2 {
			name = fmt.Sprintf("ghost-%d", round)
		}
		statuses := make([]int, guesses)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range guesses {
			wg.Go(func() {
				<-start
				resp, err := replicas[i%2].Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": name, "password": "wrong-guess-" + strconv.Itoa(i)}})
				if err != nil {
					t.Errorf("guess %d: %v", i, err)
					return
				}
				if resp.Status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					t.Errorf("guess %d: got 429 without Retry-After", i)
				}
				statuses[i] = resp.Status
			})
		}
		close(start)
		wg.Wait()
		checked, refused := 0, 0
		for _, s := range statuses {
			switch s {
			case http.StatusUnauthorized:
				checked++
			case http.StatusTooManyRequests:
				refused++
			}
		}
		if checked < 1 || checked > limit || checked+refused != guesses {
			t.Fatalf("round %d, %s: got %d checked (401) and %d refused (429) of %d, want 1..%d checked and the rest refused (statuses %v)",
				round, name, checked, refused, guesses, limit, statuses)
		}
		for _, srv := range replicas {
			resp := login(t, srv, name, p.Password, nil)
			if resp.Status != http.StatusTooManyRequests || resp.Cookie("terdut_session") != nil {
				t.Fatalf("round %d: the right password after the guesses: got %d %s, want 429 and no session", round, resp.Status, resp.Body)
			}
		}
	}

	t.Run("ReleasedOnSuccess", func(t *testing.T) {
		p := apitest.MustPerson(t, replicas[0].Store, "released", store.RoleMember)
		for i := range limit - 1 {
			wantStatus(t, login(t, replicas[i%2], "released", "wrong", nil), http.StatusUnauthorized)
		}
		// Right passwords take a check each but give it back: they never use up the limit.
		for i := range 2 * limit {
			wantStatus(t, login(t, replicas[i%2], "released", p.Password, nil), http.StatusOK)
		}
		wantStatus(t, login(t, replicas[0], "released", "wrong", nil), http.StatusUnauthorized)
		wantStatus(t, login(t, replicas[1], "released", p.Password, nil), http.StatusTooManyRequests)
	})

	// A right password whose session cannot be written (the database failed the write) gives its
	// check back too: failures of the server's own never lock a person out.
	t.Run("ReleasedWhenTheSessionWriteFails", func(t *testing.T) {
		p := apitest.MustPerson(t, replicas[0].Store, "unlucky", store.RoleMember)
		exec := func(sql string) {
			t.Helper()
			if _, err := replicas[0].Store.Pool().Exec(t.Context(), sql); err != nil {
				t.Fatal(err)
			}
		}
		exec(fmt.Sprintf(`CREATE FUNCTION fail_session() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'injected failure'; END $$;
			CREATE TRIGGER fail_session BEFORE INSERT ON sessions FOR EACH ROW
			WHEN (NEW.user_id = %d) EXECUTE FUNCTION fail_session()`, p.User.ID))
		for i := range 2 * limit {
			resp := login(t, replicas[i%2], "unlucky", p.Password, nil)
			wantStatus(t, resp, http.StatusInternalServerError)
			if strings.Contains(string(resp.Body), "injected") {
				t.Fatalf("the database's error reached the body: %s", resp.Body)
			}
		}
		exec(`DROP TRIGGER fail_session ON sessions; DROP FUNCTION fail_session()`)
		for i := range 2 {
			wantStatus(t, login(t, replicas[i], "unlucky", p.Password, nil), http.StatusOK)
		}
	})
}

// TestLogin_RacingPasswordReset: sign-ins with the old password that race an admin's reset of
// it, on two replicas, get no session that outlives the reset. A sign-in creates its session only
// if the hash it checked is still the stored one, under a share lock on the user's row, and the
// reset revokes the person's sessions; so once the reset has answered, every session the old
// password got is dead.
func TestLogin_RacingPasswordReset(t *testing.T) {
	db := pgtest.MustDatabase(t)
	// A bcrypt cost above the minimum widens the window between the check and the session.
	passwords, err := api.NewPasswords(6)
	if err != nil {
		t.Fatal(err)
	}
	opts := func(o *api.Options) {
		o.Passwords = passwords
		o.LoginLimit = store.RateLimit{Max: 1 << 20, Window: time.Minute}
	}
	a, b := apitest.NewServer(t, db, opts), apitest.NewServer(t, db, opts)
	admin := a.MustClaim(t)
	person := apitest.MustPerson(t, a.Store, "raced", store.RoleMember)
	setPassword := func(srv *apitest.Server, pw string) {
		t.Helper()
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodPut, Path: userURL(person.User.ID, "/password"),
			Bearer: admin, Body: map[string]string{"password": pw}})
		wantStatus(t, resp, http.StatusNoContent)
	}
	var lateAnswers atomic.Int64 // sign-ins with the old password that answered after the reset did
	for round := range 6 {
		old := fmt.Sprintf("old-password-%d", round)
		setPassword(a, old)
		var done atomic.Bool
		var mu sync.Mutex
		var sessions []*http.Cookie
		signedIn := make(chan struct{}, 1)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				srv := []*apitest.Server{a, b}[w%2]
				for !done.Load() {
					resp, err := srv.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
						Body: map[string]string{"username": "raced", "password": old}})
					if err != nil {
						t.Errorf("sign in: %v", err)
						return
					}
					if done.Load() {
						lateAnswers.Add(1)
					}
					if c := resp.Cookie("terdut_session"); resp.Status == http.StatusOK && c != nil {
						mu.Lock()
						sessions = append(sessions, c)
						mu.Unlock()
						select {
						case signedIn <- struct{}{}:
						default:
						}
					} else if resp.Status != http.StatusUnauthorized {
						t.Errorf("sign in with the old password: got %d %s, want 200 or 401", resp.Status, resp.Body)
						return
					}
				}
			})
		}
		select {
		case <-signedIn:
		case <-time.After(30 * time.Second):
			done.Store(true)
			wg.Wait()
			t.Fatalf("round %d: no sign-in with the old password succeeded in 30s", round)
		}
		setPassword([]*apitest.Server{a, b}[round%2], fmt.Sprintf("new-password-%d", round))
		done.Store(true)
		wg.Wait()
		for i, c := range sessions {
			if got := meStatus(t, b, c); got != http.StatusUnauthorized {
				t.Fatalf("round %d: session %d of %d, got with the old password: GET /api/me got %d after the reset, want 401",
					round, i+1, len(sessions), got)
			}
		}
	}
	if lateAnswers.Load() == 0 {
		t.Fatalf("no sign-in answered after a reset: the sign-ins did not race the resets")
	}
}

// TestLogin_OddUsernames: a username of any length and any characters gets the generic 401,
// never a 5xx, and logs no error. The throttle keys a username by its hash, so no cut can split
// a character (127 "a" and an "é" once answered 500: Postgres refused the half character).
func TestLogin_OddUsernames(t *testing.T) {
	e := newCoreEnv(t, nil)
	for _, name := range []string{
		strings.Repeat("a", 127) + "é",
		strings.Repeat("a", 126) + "€",
		strings.Repeat("a", 127) + "😀",
		strings.Repeat("é", 200),
		strings.Repeat("Ä", 5000),
		"\u0130" + strings.Repeat("b", 130), // İ lower-cases to two more bytes
	} {
		resp := login(t, e.srv, name, "some-password", nil)
		wantAPIError(t, resp, http.StatusUnauthorized, "invalid_credentials")
	}
	if logs := e.srv.Logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
		t.Fatalf("got an error logged for an odd username, want none: %s", logs)
	}
}

// TestPasswords_CurrentPasswordThrottle: guessing current_password when changing one's own
// password is throttled like sign-in, on the same count: past the limit even the right current
// password is refused, and the password is not changed.
func TestPasswords_CurrentPasswordThrottle(t *testing.T) {
	e := newCoreEnv(t, func(o *api.Options) { o.LoginLimit = store.RateLimit{Max: 3, Window: time.Hour} })
	change := func(current string) apitest.Response {
		return e.do(t, apitest.Request{Method: http.MethodPut, Path: userURL(e.alice.User.ID, "/password"),
			Bearer: e.alice.APIKey, Body: map[string]string{"password": "a-new-password", "current_password": current}})
	}
	for i := range 3 {
		wantAPIError(t, change("wrong-guess-"+strconv.Itoa(i)), http.StatusForbidden, "wrong_current_password")
	}
	wantAPIError(t, change("another-guess"), http.StatusTooManyRequests, "rate_limited")
	resp := change(e.alice.Password)
	wantAPIError(t, resp, http.StatusTooManyRequests, "rate_limited")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got no Retry-After, want one")
	}
	// The same count throttles sign-in; and the password is still the old one.
	wantStatus(t, login(t, e.srv, "alice", e.alice.Password, nil), http.StatusTooManyRequests)
	_, hash, _, err := e.srv.Store.UserForSignIn(t.Context(), e.alice.User.Username, store.GateOff, store.RateLimit{})
	if err != nil || bcrypt.CompareHashAndPassword([]byte(hash), []byte(e.alice.Password)) != nil {
		t.Fatalf("alice's password after the refused change: got %v, want the old one", err)
	}

	t.Run("RightPasswordReleases", func(t *testing.T) {
		for i := range 6 {
			pw := fmt.Sprintf("bobs-password-%d", i)
			current := e.bob.Password
			if i > 0 {
				current = fmt.Sprintf("bobs-password-%d", i-1)
			}
			wantStatus(t, e.do(t, apitest.Request{Method: http.MethodPut, Path: userURL(e.bob.User.ID, "/password"),
				Bearer: e.bob.APIKey, Body: map[string]string{"password": pw, "current_password": current}}), http.StatusNoContent)
		}
	})
}

// TestLogin_Rehash: a password stored at another bcrypt cost than --password-hash-cost is
// rehashed at the configured cost when its owner signs in, keeping their sessions; so after the
// cost is raised, checking a real user's password takes as long as checking the dummy for a
// name that does not exist.
func TestLogin_Rehash(t *testing.T) {
	db := pgtest.MustDatabase(t)
	withCost := func(cost int) func(*api.Options) {
		return func(o *api.Options) {
			p, err := api.NewPasswords(cost)
			if err != nil {
				t.Fatal(err)
			}
			o.Passwords = p
		}
	}
	raised, lowered := apitest.NewServer(t, db, withCost(6)), apitest.NewServer(t, db, withCost(bcrypt.MinCost))
	raised.MustClaim(t)
	alice := apitest.MustPerson(t, raised.Store, "alice", store.RoleMember) // stored at bcrypt.MinCost
	storedCost := func() (int, string) {
		t.Helper()
		_, hash, _, err := raised.Store.UserForSignIn(t.Context(), alice.User.Username, store.GateOff, store.RateLimit{})
		if err != nil {
			t.Fatal(err)
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			t.Fatal(err)
		}
		return cost, hash
	}
	first := raised.MustLogin(t, "alice", alice.Password)
	cost, hash := storedCost()
	if cost != 6 {
		t.Fatalf("stored cost after a sign-in at cost 6: got %d, want 6", cost)
	}
	raised.MustLogin(t, "alice", alice.Password)
	if _, again := storedCost(); again != hash {
		t.Fatalf("a sign-in at the stored cost rehashed the password, want it left alone")
	}
	if got := meStatus(t, raised, first); got != http.StatusOK {
		t.Fatalf("the first session after the rehash: got %d, want 200 (a rehash keeps sessions)", got)
	}
	lowered.MustLogin(t, "alice", alice.Password)
	if cost, _ := storedCost(); cost != bcrypt.MinCost {
		t.Fatalf("stored cost after a sign-in at cost %d: got %d, want %d", bcrypt.MinCost, cost, bcrypt.MinCost)
	}
}

// TestLogin_PasswordReplacedDuringCheck: a sign-in whose password is replaced after its check
// found it right. Replaced by another password, it answers 401 (503 when the claim was
// reopened too) and gives its reserved check back: the password was right when checked, so it
// is no failed guess, and it must not hold a place under the guessing limit until its lease
// ends. Replaced by the same password at another cost, it signs in. Either way the person's
// guessing count is left as it was.
func TestLogin_PasswordReplacedDuringCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		other    bool // replaced by another password, not the same one
		reset    bool // and the claim reopened
		status   int
		code     string
		signedIn bool
	}{
		{"ByAnotherPassword", true, false, http.StatusUnauthorized, "invalid_credentials", false},
		{"BySamePasswordAtAnotherCost", false, false, http.StatusOK, "", true},
		{"ByAnotherPasswordAndAReset", true, true, http.StatusServiceUnavailable, "bootstrap_pending", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
				o.LoginLimit = store.RateLimit{Max: 5, Window: time.Hour}
			})
			srv.MustClaim(t)
			p := apitest.MustPerson(t, srv.Store, strings.ToLower(tc.name), store.RoleMember)
			meanwhile := p.Password
			if tc.other {
				meanwhile = "another-password-of-" + p.User.Username
			}
			rec := serveWithReplacedPassword(t, srv, meanwhile, tc.reset, httptest.NewRequest(http.MethodPost, "/api/auth/login",
				strings.NewReader(fmt.Sprintf(`{"username":%q,"password":%q}`, p.User.Username, p.Password))))
			if rec.Code != tc.status || tc.code != "" && !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
				t.Fatalf("the sign-in: got %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.code)
			}
			wantNothingCounted(t, srv, p.User.Username)
			if got := count(t, srv, `SELECT count(*) FROM sessions WHERE user_id = $1`, p.User.ID); (got == 1) != tc.signedIn {
				t.Errorf("%s's sessions after the sign-in: %d, want signed in: %v", p.User.Username, got, tc.signedIn)
			}
		})
	}
}

// leavingStore is the real store, except that its client leaves (the request's context, whose
// cancel function is under disconnectKey, is cancelled) as soon as UserForSignIn has reserved
// a check: while the password is being checked.
type leavingStore struct{ *store.Store }

func (s leavingStore) UserForSignIn(ctx context.Context, username string, gate store.Gate,
	limit store.RateLimit) (store.User, string, store.Attempt, error) {
	u, hash, a, err := s.Store.UserForSignIn(ctx, username, gate, limit)
	if cancel, ok := ctx.Value(disconnectKey{}).(context.CancelFunc); ok {
		cancel()
	}
	return u, hash, a, err
}

// TestPasswords_CurrentPasswordClientGone: a change of one's own password whose client leaves
// while its current password, a right one, is checked. The check is given back all the same:
// it is no failed guess, and it must not hold a place under the guessing limit until its lease
// ends.
func TestPasswords_CurrentPasswordClientGone(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.LoginLimit = store.RateLimit{Max: 5, Window: time.Hour}
	})
	srv.MustClaim(t)
	p := apitest.MustPerson(t, srv.Store, "gone", store.RoleMember)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(context.WithValue(ctx, disconnectKey{}, cancel), http.MethodPut,
		userURL(p.User.ID, "/password"), strings.NewReader(fmt.Sprintf(`{"password":"a-new-password-of-gone","current_password":%q}`, p.Password)))
	req.Header.Set("Authorization", "Bearer "+p.APIKey)
	api.NewServer(leavingStore{srv.Store}, srv.Options).ServeHTTP(httptest.NewRecorder(), req)
	if ctx.Err() == nil {
		t.Fatal("the client never left: the store's UserForSignIn was not called")
	}
	wantNothingCounted(t, srv, p.User.Username)
}
