package faults

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// outcome tallies what a load loop saw.
type outcome struct {
	mu       sync.Mutex
	statuses map[int]int
	slowest  time.Duration
	errs     []error
}

func (o *outcome) add(status int, took time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.errs = append(o.errs, err)
		return
	}
	o.statuses[status]++
	o.slowest = max(o.slowest, took)
}

// load sends requests from n goroutines until stop is closed.
func load(srv *apitest.Server, n int, req apitest.Request, stop <-chan struct{}) (*outcome, *sync.WaitGroup) {
	o := &outcome{statuses: map[int]int{}}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := srv.Do(req)
				o.add(resp.Status, time.Since(start), err)
				if err == nil && resp.Status >= 500 && resp.Status != http.StatusServiceUnavailable {
					o.add(0, 0, &unexpected{resp})
				}
				time.Sleep(5 * time.Millisecond) // a steady load, not a busy loop
			}
		}()
	}
	return o, &wg
}

type unexpected struct{ resp apitest.Response }

func (u *unexpected) Error() string { return string(u.resp.Body) }

// TestDatabaseRestartUnderLoad stops Postgres while requests flow, then starts it again.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	cl := startCluster(t)
	srv := apitest.NewServer(t, cl.url(), nil)
	srv.MustClaim(t)
	p := apitest.MustPerson(t, srv.Store, "on-call", store.RoleMember)
	me := apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: p.APIKey}

	stop := make(chan struct{})
	healthy, wg := load(srv, 4, me, stop)
	waitFor(t, "the load to be served", func() bool {
		healthy.mu.Lock()
		defer healthy.mu.Unlock()
		return healthy.statuses[http.StatusOK] >= 4
	})

	cl.stop()
	down := time.Now()
	// While the database is down: answers come quickly, as 503 with a clear code.
	var sawUnavailable bool
	for time.Since(down) < 3*time.Second {
		start := time.Now()
		resp := srv.MustDo(t, me)
		if took := time.Since(start); took > answerBound {
			t.Fatalf("a request took %s while the database was down, want an answer within %s", took, answerBound)
		}
		if resp.Status == http.StatusServiceUnavailable && resp.Code() == "unavailable" {
			sawUnavailable = true
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		}
		ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
		// The public answer says no more than that; the log says why.
		if ready.Status != http.StatusServiceUnavailable || strings.TrimSpace(string(ready.Body)) != `{"status":"unavailable"}` ||
			!strings.Contains(srv.Logs.String(), `"reason":"database_unreachable"`) {
			t.Fatalf("readyz with the database down: got %d %s, want 503 and the log naming the database", ready.Status, ready.Body)
		}
		if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/healthz"}).Status; got != http.StatusOK {
			t.Fatalf("healthz with the database down: got %d, want 200 (liveness never depends on it)", got)
		}
	}
	if !sawUnavailable {
		t.Fatal("never saw 503 unavailable while the database was down")
	}

	cl.start()
	up := time.Now()
	waitFor(t, "the service to return with the database", func() bool { return srv.MustDo(t, me).Status == http.StatusOK })
	t.Logf("service returned %s after the database started", time.Since(up).Round(time.Millisecond))
	// Its ping has 2 s, which a busy machine can miss now and then: wait for it, bounded.
	waitFor(t, "readyz to answer 200 after the restart", func() bool {
		return srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"}).Status == http.StatusOK
	})
	close(stop)
	wg.Wait()

	healthy.mu.Lock()
	defer healthy.mu.Unlock()
	for _, err := range healthy.errs {
		t.Errorf("load: %v", err)
	}
	for status := range healthy.statuses {
		if status != http.StatusOK && status != http.StatusServiceUnavailable {
			t.Errorf("load saw status %d (%d times), want only 200 and 503", status, healthy.statuses[status])
		}
	}
	if healthy.slowest > answerBound {
		t.Errorf("slowest request under load took %s, want an answer within %s", healthy.slowest, answerBound)
	}
	if strings.Contains(srv.Logs.String(), "panic") {
		t.Error("the server logged a panic")
	}
	t.Logf("statuses under load: %v, slowest %s", healthy.statuses, healthy.slowest)
}
