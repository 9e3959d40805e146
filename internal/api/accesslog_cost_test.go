package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/logbuf"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// headerWriter is the least http.ResponseWriter: a header map and nothing kept.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(int)             {}

// TestAccessLog_Allocations: the access line of GET /api/me with an API key (the request
// clients make most) costs no allocation of its own: the request allocates as much with the
// access log on as with it off (0.05 more, measured). Under -race, sync.Pool drops a quarter
// of what it is given on purpose, so the log's processor token (internal/shard: the token
// and its cleanup) is made again now and then: about 1.5 more a request on average, so
// under -race the bound is 2, where slog cost seven.
func TestAccessLog_Allocations(t *testing.T) {
	db := pgtest.MustDatabase(t)
	allocs := func(on bool) float64 {
		srv := apitest.NewServer(t, db, func(o *api.Options) {
			o.AccessLog = nil
			if on { // as the server writes them: held in a buffer
				logs := logbuf.New(io.Discard, time.Hour)
				t.Cleanup(func() { _ = logs.Close() })
				o.AccessLog = logs.Held()
			}
		})
		p := apitest.MustPerson(t, srv.Store, "ann-"+map[bool]string{true: "on", false: "off"}[on], store.RoleMember)
		h := srv.HTTP.Config.Handler
		r := httptest.NewRequest(http.MethodGet, "/api/me", nil)
		r.Header.Set("Authorization", "Bearer "+p.APIKey)
		serve := func() { h.ServeHTTP(&headerWriter{h: http.Header{}}, r) }
		serve() // warm: the key's last use is written once
		return mallocsPerRun(400, serve)
	}
	off, on := allocs(false), allocs(true)
	bound := 1.0
	if raceDetector {
		bound = 2
	}
	if on-off >= bound {
		t.Errorf("allocations a GET /api/me: got %.2f with the access log on, %.2f off; want less than %v more on", on, off, bound)
	}
}

// mallocsPerRun is testing.AllocsPerRun without its rounding down to a whole number.
func mallocsPerRun(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}
