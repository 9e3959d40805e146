package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// gateGoal: the gate may cost a sign-in at most 3% of its throughput.
var gateGoal = AtLeast(0.97)

// gatePassword compares password sign-ins per second with the gate on and off. The install
// is claimed, so both sides sign in; the gate's cost is its quick check of the claim state
// and the share lock its transaction takes.
func (e *env) gatePassword(ctx context.Context) (Figure, error) {
	bodies := make([][]byte, signInClients)
	for c := range bodies {
		bodies[c] = e.loginBody(c)
	}
	measure := func(s *apitest.Server) (round, error) {
		return e.driveCPU(ctx, signInClients, e.cfg.Round, func(ctx context.Context, c int) (bool, error) {
			resp, err := e.client.do(ctx, http.MethodPost, s.URL+"/api/auth/login", bodies[c], nil)
			if err != nil {
				return false, err
			}
			if resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("password sign-in: got %d, want 200", resp.StatusCode)
			}
			return false, nil
		})
	}
	on, off, err := e.compareRates(measure)
	if err != nil {
		return Figure{}, err
	}
	f := newFigure("gate_password", "password sign-ins/s, gate on / gate off", "/s",
		median(on.rates), median(off.rates), gateGoal, gateDetails(on, off))
	f.Details["bcrypt_cost"] = "bcrypt.MinCost on both sides"
	f.CPURatio = cpuRatio(on, off)
	return f, nil
}

// gateOIDC compares OIDC callbacks per second with the gate on and off. Each round first
// prepares the sign-ins it will finish (start on the instance, approval by the provider),
// untimed, then times only the callbacks: code exchange, ID token verification and the
// sign-in transaction, where the gate takes its share lock. Each client signs in its own
// person, so that no two callbacks wait for each other's row.
func (e *env) gateOIDC(ctx context.Context) (Figure, error) {
	if e.oidcRate == 0 {
		e.oidcRate = 400 // a first guess, corrected by the warm-up rounds
	}
	measure := func(s *apitest.Server) (round, error) {
		perClient := int(math.Ceil(1.3*e.oidcRate*e.cfg.Round.Seconds()/signInClients)) + 2
		flows, err := e.prepareOIDC(ctx, s, perClient)
		if err != nil {
			return round{}, err
		}
		next := make([]int, signInClients)
		r, err := e.driveCPU(ctx, signInClients, e.cfg.Round, func(ctx context.Context, c int) (bool, error) {
			if next[c] == len(flows[c]) {
				return false, errExhausted
			}
			f := flows[c][next[c]]
			next[c]++
			resp, err := e.client.do(ctx, http.MethodGet, s.URL+f.Callback.RequestURI(), nil,
				func(r *http.Request) { r.AddCookie(f.StateCookie) })
			if err != nil {
				return false, err
			}
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
				return false, fmt.Errorf("OIDC callback: got %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
			}
			return false, nil
		})
		e.oidcRate = max(e.oidcRate, r.rate())
		return r, err
	}
	on, off, err := e.compareRates(measure)
	if err != nil {
		return Figure{}, err
	}
	f := newFigure("gate_oidc", "OIDC callbacks/s, gate on / gate off", "/s",
		median(on.rates), median(off.rates), gateGoal, gateDetails(on, off))
	f.CPURatio = cpuRatio(on, off)
	return f, nil
}

// compareRates warms both instances up with a round each (see Config.NoWarmup), then
// measures cfg.Rounds rounds on each, alternating.
func (e *env) compareRates(measure func(*apitest.Server) (round, error)) (on, off *side, err error) {
	on, off = &side{}, &side{}
	run := func(s *apitest.Server, into *side) func() error {
		return func() error {
			r, err := measure(s)
			if into != nil {
				into.add(r.result())
			}
			return err
		}
	}
	if err := e.warmUp(run(e.gateOn, nil), run(e.gateOff, nil)); err != nil {
		return nil, nil, err
	}
	err = alternate(e.cfg.Rounds, run(e.gateOn, on), run(e.gateOff, off))
	return on, off, err
}

func gateDetails(on, off *side) map[string]any {
	return map[string]any{"clients": signInClients, "rounds_gate_on": on.rates, "rounds_gate_off": off.rates,
		"cpu_us_per_op_gate_on": on.cpuPerOp(), "cpu_us_per_op_gate_off": off.cpuPerOp()}
}

// prepareOIDC starts perClient sign-ins on s for each client's person and has the provider
// approve them, two at a time (apitest's client keeps two connections per host).
func (e *env) prepareOIDC(ctx context.Context, s *apitest.Server, perClient int) ([][]apitest.OIDCFlow, error) {
	flows := make([][]apitest.OIDCFlow, signInClients)
	errs := make([]error, signInClients)
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for c := range signInClients {
		wg.Go(func() {
			for range perClient {
				sem <- struct{}{}
				f, err := s.StartOIDC(ctx, e.provider, ssoSubject(c))
				<-sem
				if err != nil {
					errs[c] = fmt.Errorf("prepare OIDC sign-ins: %w", err)
					return
				}
				flows[c] = append(flows[c], f)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return flows, nil
}
