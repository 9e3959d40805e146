package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// contestGoal: a claim in progress may at most double a sign-in's p99 latency.
var contestGoal = AtMost(2)

// contestedSignIn compares the p99 latency of password sign-ins (gate on) while another
// replica resets and claims the install in a loop, with the p99 while nothing else runs.
// Claims and resets hold the claim row FOR UPDATE and a sign-in's transaction takes it FOR
// SHARE: this is the wait the gate can add.
//
// Sign-ins arrive at a steady rate, offeredLoad of what signInClients clients manage back to
// back, cycling through the people. The loop resets and claims claimPairsPerSecond times a
// second, hundreds of times what a reset limit allows: back to back, it would keep the
// install pending half of the time, and the figure would be about refusals, not waits.
// Sign-ins that arrive while it is pending are refused (503 bootstrap_pending), quickly or
// after waiting for the lock; the figure counts every answer, and the details give the p99
// of the sign-ins that succeeded and how many were refused.
func (e *env) contestedSignIn(ctx context.Context) (Figure, error) {
	bodies := make([][]byte, len(e.people))
	for i := range bodies {
		bodies[i] = e.loginBody(i)
	}
	signIn := func(contest bool) op {
		return func(ctx context.Context, i int) (bool, error) {
			resp, err := e.client.do(ctx, http.MethodPost, e.gateOn.URL+"/api/auth/login", bodies[i], nil)
			switch {
			case err != nil:
				return false, err
			case resp.StatusCode == http.StatusOK:
				return false, nil
			case contest && resp.StatusCode == http.StatusServiceUnavailable:
				return true, nil
			}
			return false, fmt.Errorf("password sign-in: got %d, want 200 or, while claims run, 503", resp.StatusCode)
		}
	}
	capacity, err := drive(ctx, signInClients, e.cfg.Round, signIn(false))
	if err != nil {
		return Figure{}, fmt.Errorf("capacity: %w", err)
	}
	rate := capacity.rate() * offeredLoad

	var quiet, contested, succeeded []time.Duration
	var refused, pairs int
	var contestTime time.Duration
	measure := func(contest bool) func() error {
		return func() error {
			stop, loop := make(chan struct{}), make(chan loopResult, 1)
			if contest {
				go func() { loop <- e.claimLoop(ctx, stop) }()
			}
			r, err := pace(ctx, rate, len(e.people), 2*e.cfg.Round, signIn(contest))
			if contest {
				close(stop)
				lr := <-loop
				if lr.err != nil {
					return lr.err
				}
				pairs += lr.pairs
				contestTime += r.elapsed
			}
			for _, s := range r.samples {
				switch {
				case !contest:
					quiet = append(quiet, s.latency)
				case s.refused:
					refused++
					contested = append(contested, s.latency)
				default:
					succeeded = append(succeeded, s.latency)
					contested = append(contested, s.latency)
				}
			}
			return err
		}
	}
	if err := alternate(e.cfg.Rounds, measure(true), measure(false)); err != nil {
		return Figure{}, err
	}
	if len(contested) == 0 || len(quiet) == 0 || pairs == 0 {
		return Figure{}, fmt.Errorf("got %d sign-ins with claims running, %d without and %d claims, want some of each",
			len(contested), len(quiet), pairs)
	}
	return newFigure("contested_p99", "p99 password sign-in, claims running / none", "ms",
		percentile(contested, 99), percentile(quiet, 99), contestGoal, map[string]any{
			"capacity_per_s":            capacity.rate(),
			"offered_per_s":             rate,
			"round_seconds":             (2 * e.cfg.Round).Seconds(),
			"signins_quiet":             len(quiet),
			"signins_contested":         len(contested),
			"signins_contested_refused": refused,
			"p50_quiet_ms":              percentile(quiet, 50),
			"p50_contested_ms":          percentile(contested, 50),
			"p99_contested_ok_ms":       percentile(succeeded, 99),
			"claim_reset_pairs_per_s":   float64(pairs) / contestTime.Seconds(),
		}), nil
}

// The contested claim's load.
const (
	offeredLoad         = 0.4 // sign-ins arrive at this fraction of the measured capacity
	claimPairsPerSecond = 20  // resets and claims per second, each pair back to back
)

type loopResult struct {
	pairs int
	err   error
}

// claimLoop resets and claims the install on the operator's replica, a pair every
// 1/claimPairsPerSecond (or back to back when a pair takes longer), until stop is closed.
// It always ends on a claim, so the install is claimed when it returns.
func (e *env) claimLoop(ctx context.Context, stop <-chan struct{}) loopResult {
	var lr loopResult
	tick := time.NewTicker(time.Second / claimPairsPerSecond)
	defer tick.Stop()
	for {
		if lr.err = e.operatorCall(ctx, "/api/bootstrap/reset", http.StatusOK); lr.err != nil {
			return lr
		}
		if lr.err = e.operatorCall(ctx, "/api/bootstrap", http.StatusCreated); lr.err != nil {
			return lr
		}
		lr.pairs++
		select {
		case <-stop:
			return lr
		case <-tick.C:
		}
	}
}

// operatorCall POSTs to path on the operator's replica with the operator token.
func (e *env) operatorCall(ctx context.Context, path string, want int) error {
	resp, err := e.client.do(ctx, http.MethodPost, e.operator.URL+path, nil, bearer(apitest.OperatorToken))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: got %d, want %d", path, resp.StatusCode, want)
	}
	return nil
}
