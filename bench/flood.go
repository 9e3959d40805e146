package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// floodGoal: a flood of sign-ins for made-up usernames may at most double a real sign-in's
// p99 latency (issue 9, item 4).
var floodGoal = AtMost(2)

// The sign-in flood's load.
const (
	// floodHashCost is the bcrypt cost of the terdut-server process (a quarter of the time of
	// bcrypt.DefaultCost, a sixteenth of the server's default): bcrypt still dominates a
	// sign-in, so the flood costs what a real one does, and a round yields enough samples.
	floodHashCost = 8
	floodClients  = 32 // wrk's connections, each sending sign-ins back to back
	signInRate    = 10 // real sign-ins per second, with and without the flood
)

// flooded is the person who signs in while the flood runs: a password hashed at the
// server's cost, so that signing in costs what it costs everyone.
type flooded struct {
	body []byte
	next atomic.Uint32 // numbers the client addresses (see signInFrom)
}

// newFloodedPerson creates the person, hashing the password at floodHashCost.
func (e *env) newFloodedPerson(tb testing.TB) *flooded {
	tb.Helper()
	p := apitest.MustPerson(tb, e.gateOn.Store, "bench-flooded", store.RoleMember)
	pw, err := api.NewPasswords(floodHashCost)
	if err != nil {
		tb.Fatal(err)
	}
	hash, err := pw.Hash(p.Password)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.gateOn.Store.SetPasswordHash(tb.Context(), p.User.ID, hash, ""); err != nil {
		tb.Fatalf("bench: set password: %v", err)
	}
	body, _ := json.Marshal(map[string]string{"username": p.User.Username, "password": p.Password})
	return &flooded{body: body}
}

// signIn is one real sign-in, from a loopback address of its own (127.2.x.y): the flood
// comes from 127.0.0.1, and a limit per client address, where the server has one, counts
// each person apart from the flood as it would on a network. A refused sign-in (429 or 503)
// is tried again after its Retry-After, as a client would, and its latency counts the wait.
func (f *flooded) signIn(ctx context.Context, url string) (refused bool, err error) {
	n := f.next.Add(1)
	local := &net.TCPAddr{IP: net.IPv4(127, 2, byte(n>>8), byte(n))}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: local}).DialContext}}
	defer hc.CloseIdleConnections()
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/auth/login", bytes.NewReader(f.body))
		if err != nil {
			return refused, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return refused, fmt.Errorf("real sign-in: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK:
			return refused, nil
		case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < 3:
			refused = true
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-time.After(time.Duration(min(max(wait, 1), 5)) * time.Second):
			case <-ctx.Done():
				return refused, ctx.Err()
			}
		default:
			return refused, fmt.Errorf("real sign-in: got %d, want 200", resp.StatusCode)
		}
	}
}

// floodScript is wrk's Lua script for the flood: sign-ins for random usernames that exist
// nowhere, each with a wrong password, and a count of the answers by status.
const floodScript = `
local threads = {}
local n = 0
function setup(thread)
  n = n + 1
  thread:set("id", n)
  table.insert(threads, thread)
end
function init(args)
  math.randomseed(os.time() * 100 + id)
  statuses = {}
end
function request()
  local name = string.format("flood-%06x%06x", math.random(0, 0xffffff), math.random(0, 0xffffff))
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"},
    '{"username":"' .. name .. '","password":"not-the-password"}')
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for code, count in pairs(t:get("statuses")) do
      io.write(string.format("status %d %d\n", code, count))
    end
  end
end
`

var floodStatus = regexp.MustCompile(`(?m)^status ([0-9]+) ([0-9]+)$`)

// signInFlood compares the p99 latency of real password sign-ins on the terdut-server
// process while wrk floods it with sign-ins for random usernames from floodClients
// connections, with their p99 while nothing else runs. Real sign-ins arrive at signInRate a
// second, each at its planned time (see pace), in rounds of 2×cfg.Round, alternating.
func (e *env) signInFlood(ctx context.Context) (Figure, error) {
	script := filepath.Join(os.TempDir(), fmt.Sprintf("terdut-bench-flood-%d.lua", os.Getpid()))
	if err := os.WriteFile(script, []byte(floodScript), 0o600); err != nil {
		return Figure{}, err
	}
	defer os.Remove(script)
	d := 2 * e.cfg.Round
	signIn := func(ctx context.Context, _ int) (bool, error) { return e.signIn.signIn(ctx, e.server.URL) }
	var quiet, flooded []time.Duration
	var refusedQuiet, refusedFlooded, floodRequests int
	var floodRates []float64
	statuses := map[string]int{}
	socketErrors := 0
	measure := func(flood bool) func() error {
		return func() error {
			type wrkDone struct {
				out []byte
				err error
			}
			done := make(chan wrkDone, 1)
			if flood {
				// wrk runs a second longer than the real sign-ins, which start once it is going.
				go func() {
					out, _, err := e.runWrk(ctx, e.server.URL+"/api/auth/login", floodClients, d+time.Second, "-s", script)
					done <- wrkDone{out, err}
				}()
				time.Sleep(500 * time.Millisecond)
			}
			r, err := pace(ctx, signInRate, 1, d, signIn)
			if flood {
				w := <-done
				if w.err != nil {
					return w.err
				}
				if m := wrkRate.FindSubmatch(w.out); m != nil {
					rate, _ := strconv.ParseFloat(string(m[1]), 64)
					floodRates = append(floodRates, rate)
				}
				if m := wrkRequests.FindSubmatch(w.out); m != nil {
					n, _ := strconv.Atoi(string(m[1]))
					floodRequests += n
				}
				for _, m := range floodStatus.FindAllSubmatch(w.out, -1) {
					n, _ := strconv.Atoi(string(m[2]))
					statuses[string(m[1])] += n
				}
				if wrkErrors.Find(w.out) != nil {
					socketErrors++
				}
			}
			if err != nil {
				return err
			}
			for _, s := range r.samples {
				if flood {
					flooded = append(flooded, s.latency)
				} else {
					quiet = append(quiet, s.latency)
				}
				if s.refused && flood {
					refusedFlooded++
				} else if s.refused {
					refusedQuiet++
				}
			}
			return nil
		}
	}
	if err := alternate(e.cfg.Rounds, measure(true), measure(false)); err != nil {
		return Figure{}, err
	}
	if len(flooded) == 0 || len(quiet) == 0 {
		return Figure{}, fmt.Errorf("got %d real sign-ins with the flood and %d without, want some of each", len(flooded), len(quiet))
	}
	return newFigure("signin_flood_p99", fmt.Sprintf("p99 password sign-in, random-username flood c=%d / none", floodClients), "ms",
		percentile(flooded, 99), percentile(quiet, 99), floodGoal, map[string]any{
			"bcrypt_cost":                          floodHashCost,
			"real_signins_per_s":                   signInRate,
			"round_seconds":                        d.Seconds(),
			"signins_flooded":                      len(flooded),
			"signins_quiet":                        len(quiet),
			"signins_refused_then_retried_flooded": refusedFlooded,
			"signins_refused_then_retried_quiet":   refusedQuiet,
			"p50_flooded_ms":                       percentile(flooded, 50),
			"p50_quiet_ms":                         percentile(quiet, 50),
			"flood_requests":                       floodRequests,
			"flood_rounds_per_s":                   floodRates,
			"flood_statuses":                       statuses,
			"flood_rounds_with_socket_errors":      socketErrors,
			"addresses":                            "flood from 127.0.0.1; each real sign-in from its own 127.2.x.y",
		}), nil
}
