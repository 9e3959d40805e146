package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestLogin_AddressRate: sign-ins from one client address are limited per minute, on each
// replica; X-Forwarded-For names the client only when the peer is a trusted proxy, and then only
// its last untrusted entry counts, so a client cannot pick its own address.
func TestLogin_AddressRate(t *testing.T) {
	db := pgtest.MustDatabase(t)
	direct := apitest.NewServer(t, db, func(o *api.Options) { o.LoginRatePerAddress = 3 })
	proxied := apitest.NewServer(t, db, func(o *api.Options) {
		o.LoginRatePerAddress = 3
		o.AddressRefusalPause = 10 * time.Millisecond // the pause is tested on direct
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	})
	direct.MustClaim(t)
	var names atomic.Int64 // a name each, so that the guessing limit per name never answers first
	signIn := func(srv *apitest.Server, forwardedFor ...string) apitest.Response {
		h := http.Header{}
		for _, f := range forwardedFor {
			h.Add("X-Forwarded-For", f)
		}
		return login(t, srv, fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", h)
	}
	wantLimited := func(resp apitest.Response) {
		t.Helper()
		wantAPIError(t, resp, http.StatusTooManyRequests, "rate_limited")
		if retry, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || retry < 1 || retry > 20 {
			t.Fatalf("Retry-After: got %q, want 1..20 (a sign-in every 20 s)", resp.Header.Get("Retry-After"))
		}
	}

	t.Run("Direct", func(t *testing.T) {
		for i := range 3 {
			wantStatus(t, signIn(direct, fmt.Sprintf("198.51.100.%d", i)), http.StatusUnauthorized)
		}
		wantLimited(signIn(direct))
		wantLimited(signIn(direct, "198.51.100.99")) // not a trusted proxy: the header says nothing
		if got := metric(t, direct, `terdut_signins_refused_total{method="password",reason="address_rate_limited"}`); got != 2 {
			t.Fatalf("refusals counted: got %v, want 2", got)
		}
	})

	// A refusal is answered after a second's pause (the default), so a client flooding from one
	// address gets about one answer a second on each connection, not thousands. (proxied and
	// the OIDC start's server pause briefly, to keep the other cases short.)
	t.Run("RefusalsArePaused", func(t *testing.T) {
		paused := apitest.NewServer(t, db, func(o *api.Options) { o.LoginRatePerAddress = 3 })
		for range 3 {
			wantStatus(t, signIn(paused), http.StatusUnauthorized)
		}
		start := time.Now()
		wantLimited(signIn(paused))
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Fatalf("a refusal took %s, want about a second's pause", took)
		}
		const conns, window = 16, 2 * time.Second
		var answered atomic.Int64
		deadline := time.Now().Add(window)
		var wg sync.WaitGroup
		for c := range conns {
			wg.Go(func() {
				for n := 0; time.Now().Before(deadline); n++ {
					resp, err := paused.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
						Body: map[string]string{"username": fmt.Sprintf("flood-%d-%d", c, n), "password": "a-wrong-password"}})
					if err != nil || resp.Status != http.StatusTooManyRequests {
						t.Errorf("flood: got %d, %v, want 429", resp.Status, err)
						return
					}
					answered.Add(1)
				}
			})
		}
		wg.Wait()
		if n, most := answered.Load(), int64(conns*(window/time.Second+1)); n > most {
			t.Fatalf("a flood from %d connections got %d answers in %s, want at most %d", conns, n, window, most)
		}
	})

	t.Run("TrustedProxy", func(t *testing.T) {
		for range 3 {
			wantStatus(t, signIn(proxied, "198.51.100.1"), http.StatusUnauthorized)
		}
		wantLimited(signIn(proxied, "198.51.100.1"))
		// A client's own entries are to the left of what the proxies appended: ignored.
		wantLimited(signIn(proxied, "203.0.113.5, 198.51.100.1"))
		wantLimited(signIn(proxied, "203.0.113.6", "198.51.100.1, 10.1.1.1"))
		wantStatus(t, signIn(proxied, "198.51.100.1, 198.51.100.2"), http.StatusUnauthorized)
		// IPv6 clients are counted by their /64.
		for i := range 3 {
			wantStatus(t, signIn(proxied, fmt.Sprintf("2001:db8:1:2::%d", i+1)), http.StatusUnauthorized)
		}
		wantLimited(signIn(proxied, "2001:db8:1:2:ffff::1"))
		wantStatus(t, signIn(proxied, "2001:db8:1:3::1"), http.StatusUnauthorized)
	})

	t.Run("OIDCStart", func(t *testing.T) {
		p := oidctest.NewProvider(t)
		srv := apitest.NewServer(t, db, func(o *api.Options) {
			o.LoginRatePerAddress, o.AddressRefusalPause, o.OIDC = 2, 10*time.Millisecond, apitest.OIDC(p)
		})
		before := count(t, srv, `SELECT count(*) FROM oidc_logins`)
		for range 2 {
			wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"}), http.StatusFound)
		}
		for _, accept := range []string{"application/json", "text/html"} {
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login", Header: http.Header{"Accept": {accept}}})
			if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("a third start (%s): got %d Retry-After %q, want 429 with Retry-After", accept, resp.Status, resp.Header.Get("Retry-After"))
			}
		}
		if n := count(t, srv, `SELECT count(*) FROM oidc_logins`); n != before+2 {
			t.Fatalf("pending sign-ins: got %d, want %d (none for the refused starts)", n, before+2)
		}
	})
}

// TestLogin_CheckSlots: at most PasswordChecks password checks run at once on a replica; a
// sign-in that finds none free within PasswordCheckWait is refused at once with 503 overloaded
// and Retry-After, and its reserved check is given back (it was no guess).
func TestLogin_CheckSlots(t *testing.T) {
	db := pgtest.MustDatabase(t)
	passwords, err := api.NewPasswords(8)
	if err != nil {
		t.Fatal(err)
	}
	const requests, limit = 24, 24
	srv := apitest.NewServer(t, db, func(o *api.Options) {
		o.Passwords, o.PasswordChecks, o.PasswordCheckWait = passwords, 1, 10*time.Millisecond
		o.LoginLimit = store.RateLimit{Max: limit, Window: time.Hour}
	})
	srv.MustClaim(t)

	var peak atomic.Int64
	stop := make(chan struct{})
	var polled sync.WaitGroup
	polled.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(metric(t, srv, "terdut_password_checks_in_flight")); n > peak.Load() {
				peak.Store(n)
			}
		}
	})
	statuses := make([]int, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			resp, err := srv.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
				Body: map[string]string{"username": "ghost", "password": "guess-" + strconv.Itoa(i)}})
			if err != nil {
				t.Error(err)
				return
			}
			if resp.Status == http.StatusServiceUnavailable && (resp.Code() != "overloaded" || resp.Header.Get("Retry-After") != "1") {
				t.Errorf("got 503 %s Retry-After %q, want code overloaded and Retry-After 1", resp.Body, resp.Header.Get("Retry-After"))
			}
			statuses[i] = resp.Status
		})
	}
	wg.Wait()
	close(stop)
	polled.Wait()
	checked, overloaded := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusUnauthorized:
			checked++
		case http.StatusServiceUnavailable:
			overloaded++
		}
	}
	if checked < 1 || overloaded < 1 || checked+overloaded != requests {
		t.Fatalf("got %d checked (401) and %d overloaded (503) of %d (%v), want some of each and nothing else", checked, overloaded, requests, statuses)
	}
	if p := peak.Load(); p > 1 {
		t.Fatalf("password checks in flight: saw %d, want at most 1", p)
	}
	// Only the checked guesses count against the username: the rest of the limit is still there.
	for i := range limit - checked {
		wantStatus(t, login(t, srv, "ghost", "later-guess-"+strconv.Itoa(i), nil), http.StatusUnauthorized)
	}
	wantAPIError(t, login(t, srv, "ghost", "one-too-many", nil), http.StatusTooManyRequests, "rate_limited")
}

// TestLogin_DisconnectMidCheck: a client that hangs up while its password is being checked
// still has the guess counted: the check was reserved before it began.
func TestLogin_DisconnectMidCheck(t *testing.T) {
	db := pgtest.MustDatabase(t)
	// A name that does not exist is checked against the dummy hash, made at this cost: a check
	// long enough to hang up in the middle of.
	passwords, err := api.NewPasswords(9)
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.NewServer(t, db, func(o *api.Options) {
		o.Passwords, o.LoginLimit = passwords, store.RateLimit{Max: 2, Window: time.Hour}
	})
	srv.MustClaim(t)

	ctx, cancel := context.WithCancel(t.Context())
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/auth/login",
			strings.NewReader(`{"username":"ghost","password":"a-wrong-guess"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	waitFor(t, "a password check in flight", func() bool {
		select {
		case err := <-answered:
			t.Fatalf("the sign-in answered (%v) before its check was seen: too quick to hang up in", err)
		default:
		}
		return metric(t, srv, "terdut_password_checks_in_flight") == 1
	})
	cancel()
	if err := <-answered; err == nil {
		t.Fatalf("the request finished before it was cancelled: the check was too quick to hang up in")
	}
	waitFor(t, "the check to end", func() bool { return metric(t, srv, "terdut_password_checks_in_flight") == 0 })
	wantStatus(t, login(t, srv, "ghost", "another-wrong-guess", nil), http.StatusUnauthorized)
	wantAPIError(t, login(t, srv, "ghost", "a-third-guess", nil), http.StatusTooManyRequests, "rate_limited")
}

// metric returns the value of the series named exactly (with its labels) on /metrics, or 0.
func metric(t *testing.T, srv *apitest.Server, series string) float64 {
	t.Helper()
	resp, err := srv.Do(apitest.Request{Method: http.MethodGet, Path: "/metrics"})
	if err != nil {
		t.Error(err)
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(resp.Body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
