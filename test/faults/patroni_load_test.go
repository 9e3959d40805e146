//go:build patroni

package faults

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// route is one way a Spilo cluster is reached, and the terdut-server replicas that use it.
type route struct {
	name     string
	replicas []*apitest.Server
}

// answer is one request of the load and what it got.
type answer struct {
	route      string
	kind       string // sign-in, me, oidc-start, oidc-callback, claim, reset
	start, end time.Time
	status     int
	code       string
	retryAfter string
	session    *http.Cookie // the session a sign-in returned
	err        error
	who        string // the username a sign-in sent
}

// ok reports whether the answer is the success its kind expects.
func (a answer) ok() bool {
	switch a.kind {
	case "oidc-start":
		return a.status == http.StatusFound
	case "oidc-callback":
		return a.status == http.StatusSeeOther
	}
	return a.err == nil && a.status >= 200 && a.status < 300
}

// signIn reports whether the answer is a sign-in that succeeded (or began, for the OIDC start).
func (a answer) signIn() bool {
	return (a.kind == "sign-in" || a.kind == "oidc-start" || a.kind == "oidc-callback") && a.ok()
}

// answers records the load's requests from many goroutines.
type answers struct {
	mu  sync.Mutex
	all []answer
}

func (r *answers) add(a answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, a)
}

func (r *answers) do(rt *route, srv *apitest.Server, kind string, req apitest.Request) (apitest.Response, answer) {
	start := time.Now()
	resp, err := srv.Do(req)
	a := answer{route: rt.name, kind: kind, start: start, end: time.Now(), status: resp.Status, code: resp.Code(), err: err}
	if body, ok := req.Body.(map[string]string); ok {
		a.who = body["username"]
	}
	if err == nil {
		a.retryAfter = resp.Header.Get("Retry-After")
		if kind == "sign-in" && resp.Status == http.StatusOK {
			a.session = resp.Cookie("terdut_session")
		}
		if kind == "oidc-callback" && resp.Status == http.StatusSeeOther {
			a.session = resp.Cookie("terdut_session")
		}
	}
	r.add(a)
	return resp, a
}

func (r *answers) snapshot() []answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]answer(nil), r.all...)
}

// write reports whether the answer's request writes: it waits for a sync standby.
func (a answer) write() bool {
	return a.kind == "sign-in" || a.kind == "oidc-callback" || a.kind == "claim" || a.kind == "reset"
}

// firstOK returns the end of the first success on rt that ended after t (of a write, if writes).
func (r *answers) firstOK(rt string, t time.Time, writes bool) (time.Time, bool) {
	var first time.Time
	for _, a := range r.snapshot() {
		if a.route == rt && a.ok() && (a.write() || !writes) && a.end.After(t) && (first.IsZero() || a.end.Before(first)) {
			first = a.end
		}
	}
	return first, !first.IsZero()
}

// statuses counts the answers on rt that ended in [from, to], by status ("err" for a failed request).
func (r *answers) statuses(rt string, from, to time.Time) string {
	n := map[string]int{}
	for _, a := range r.snapshot() {
		if a.route != rt || a.end.Before(from) || a.end.After(to) {
			continue
		}
		if a.err != nil {
			n["err"]++
		} else {
			n[fmt.Sprint(a.status)]++
		}
	}
	var keys []string
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s×%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

// startLoad starts the operator's and the people's load (runLoad and runPeople) on every
// route of s and returns what ends it and waits for it; the test's end calls it too, and a
// second call does nothing.
func startLoad(t *testing.T, s *suite, p *oidctest.Provider, operator apitest.Person, people []apitest.Person) func() {
	stop := make(chan struct{})
	load := runLoad(s.rec, s.routes, p, operator.User.Username, operator.Password, operator.APIKey, stop)
	clients := runPeople(s.rec, s.routes, people, stop)
	end := func() {
		select {
		case <-stop:
		default:
			close(stop)
			load.Wait()
			clients.Wait()
		}
	}
	t.Cleanup(end)
	return end
}

// runLoad sends password sign-ins, API-key requests and OIDC sign-ins to every replica until
// stop is closed.
func runLoad(rec *answers, routes []*route, p *oidctest.Provider, username, password, apiKey string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	signIn := apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": username, "password": password}}
	me := apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: apiKey}
	loop := func(fn func()) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				fn()
				time.Sleep(20 * time.Millisecond) // a steady load, not a busy loop
			}
		})
	}
	for _, rt := range routes {
		for _, srv := range rt.replicas {
			loop(func() { rec.do(rt, srv, "sign-in", signIn) })
			loop(func() { rec.do(rt, srv, "me", me) })
			loop(func() {
				resp, _ := rec.do(rt, srv, "oidc-start", apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login?login_hint=alice"})
				cookie := resp.Cookie("terdut_oidc_state")
				if resp.Status != http.StatusFound || cookie == nil {
					return
				}
				callback, err := p.TryAuthorize(context.Background(), resp.Header.Get("Location"))
				if err != nil {
					rec.add(answer{route: rt.name, kind: "provider", start: time.Now(), end: time.Now(), err: err})
					return
				}
				flow := apitest.OIDCFlow{StateCookie: cookie}
				if flow.Callback, err = parseURL(callback); err != nil {
					return
				}
				// Finished where it began: each replica has a public URL of its own, which the
				// provider's redirect must match.
				rec.do(rt, srv, "oidc-callback", flow.Request())
			})
		}
	}
	return &wg
}

// runPeople signs each person in again and again as a client would: through one replica
// after another, waiting what Retry-After says (at most retryCap) after a refusal, and a
// second after a success. They type only their right password, so none may ever be refused
// as guessing (429), whatever faults they retry through.
func runPeople(rec *answers, routes []*route, people []apitest.Person, stop <-chan struct{}) *sync.WaitGroup {
	const retryCap = 10 * time.Second
	var wg sync.WaitGroup
	var targets []func() (*route, *apitest.Server)
	for _, rt := range routes {
		for _, srv := range rt.replicas {
			targets = append(targets, func() (*route, *apitest.Server) { return rt, srv })
		}
	}
	for i, p := range people {
		wg.Go(func() {
			req := apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
				Body: map[string]string{"username": p.User.Username, "password": p.Password}}
			for n := i; ; n++ {
				rt, srv := targets[n%len(targets)]()
				resp, a := rec.do(rt, srv, "sign-in", req)
				wait := time.Second
				if a.err == nil && resp.Status != http.StatusOK {
					secs, _ := strconv.Atoi(a.retryAfter)
					wait = min(max(time.Duration(secs)*time.Second, 100*time.Millisecond), retryCap)
				}
				select {
				case <-stop:
					return
				case <-time.After(wait):
				}
			}
		})
	}
	return &wg
}

// count counts the answers on every route that ended in [from, to] and match.
func (r *answers) count(from, to time.Time, match func(answer) bool) int {
	n := 0
	for _, a := range r.snapshot() {
		if !a.end.Before(from) && !a.end.After(to) && match(a) {
			n++
		}
	}
	return n
}
