package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// TestMetrics_RequestSeries checks that concurrent requests land in the series of their own
// route, method and status, each counted once, through the cache of series the middleware
// keeps: 200s and 401s on one route, and an unknown path under "unmatched".
func TestMetrics_RequestSeries(t *testing.T) {
	srv := newServer(t)
	p := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	const clients, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients*each*3)
	for range clients {
		wg.Go(func() {
			for range each {
				for _, req := range []struct {
					path, key string
					want      int
				}{{"/api/me", p.APIKey, http.StatusOK}, {"/api/me", "", http.StatusUnauthorized}, {"/nowhere", "", http.StatusNotFound}} {
					resp, err := srv.Do(apitest.Request{Method: http.MethodGet, Path: req.path, Bearer: req.key})
					if err == nil && resp.Status != req.want {
						err = fmt.Errorf("GET %s: got %d, want %d", req.path, resp.Status, req.want)
					}
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	metrics := string(srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
	n := clients * each
	for _, want := range []string{
		fmt.Sprintf(`terdut_http_requests_total{method="GET",route="/api/me",status="200"} %d`, n),
		fmt.Sprintf(`terdut_http_requests_total{method="GET",route="/api/me",status="401"} %d`, n),
		fmt.Sprintf(`terdut_http_requests_total{method="GET",route="unmatched",status="404"} %d`, n),
		fmt.Sprintf(`terdut_http_request_duration_seconds_count{method="GET",route="/api/me"} %d`, 2*n),
		fmt.Sprintf(`terdut_http_request_duration_seconds_count{method="GET",route="unmatched"} %d`, n),
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}
