package bench

import (
	"strings"
	"testing"
	"time"
)

// wrkOK is wrk 4.1's report of a run whose answers all succeeded.
const wrkOK = `Running 2s test @ http://127.0.0.1:40000/api/me
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     6.46ms    2.01ms  16.61ms   85.97%
    Req/Sec     2.50k   204.45     3.21k    50.00%
  9962 requests in 2.00s, 4.21MB read
Requests/sec:   4978.73
Transfer/sec:      2.10MB
`

func TestParseWrk(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		r, err := parseWrk([]byte(wrkOK))
		if err != nil {
			t.Fatalf("got error %v, want none", err)
		}
		if r.ops != 9962 || r.rate != 4978.73 {
			t.Errorf("got %d requests at %v/s, want 9962 at 4978.73/s", r.ops, r.rate)
		}
	})
	tests := map[string]struct{ out, want string }{
		"ErrRefused": {strings.Replace(wrkOK, "Requests/sec", "  Non-2xx or 3xx responses: 9962\nRequests/sec", 1),
			"9962 answers were not 2xx"},
		"ErrSocket": {strings.Replace(wrkOK, "Requests/sec", "  Socket errors: connect 0, read 3, write 0, timeout 0\nRequests/sec", 1),
			"Socket errors: connect 0, read 3"},
		"ErrNoReport": {"unable to connect to 127.0.0.1:40000 Connection refused\n", "no request count"},
		"ErrNoAnswer": {strings.Replace(wrkOK, "9962 requests", "0 requests", 1), "no request was answered"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseWrk([]byte(tt.out))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestRunWrk_Loopback checks that the load goes nowhere but 127.0.0.1: runWrk refuses any
// other target before it starts wrk (this env has no wrk and no meter to start it with).
func TestRunWrk_Loopback(t *testing.T) {
	for _, target := range []string{"http://example.com/api/me", "http://localhost:8080/api/me",
		"http://10.0.0.1/api/me", "http://127.0.0.1.example.com/api/me", "::bad"} {
		t.Run(target, func(t *testing.T) {
			_, _, err := (&env{}).runWrk(t.Context(), target, 1, time.Second)
			if err == nil || !strings.Contains(err.Error(), "only 127.0.0.1") {
				t.Errorf("got error %v, want a refusal to send load to %s", err, target)
			}
		})
	}
}
