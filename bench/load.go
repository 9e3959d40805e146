package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// client sends the load: keep-alive connections, enough of them idle for every concurrent
// client, and redirects returned rather than followed.
type client struct{ hc *http.Client }

func newClient() *client {
	return &client{hc: &http.Client{
		Transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: 30 * time.Second,
	}}
}

// do sends the request and reads the whole answer, so that the connection is reused.
func (c *client) do(ctx context.Context, method, url string, body []byte, prep func(*http.Request)) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if prep != nil {
		prep(req)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, req.URL.Path, err)
	}
	return resp, nil
}

// bearer sets an Authorization: Bearer header.
func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// errExhausted, returned by an op, ends the round for every client: the work prepared for
// the round ran out.
var errExhausted = errors.New("prepared work exhausted")

// sample is one answered request.
type sample struct {
	latency time.Duration
	refused bool // answered 503 bootstrap_pending
}

// round is what the clients of one measured round did.
type round struct {
	elapsed time.Duration
	samples []sample
	cpu     cpuTimes // CPU time this process and the server used during the round
}

// rate is answered requests per second.
func (r round) rate() float64 { return float64(len(r.samples)) / r.elapsed.Seconds() }

// side collects one side of a comparison over its rounds.
type side struct {
	rates     []float64
	cpuPerOps []float64 // per round: CPU time of a request, self and server, in microseconds
	ops       int
	cpu       cpuTimes
}

// result is what one round of one side measured.
type result struct {
	rate float64
	ops  int
	cpu  cpuTimes
}

func (r round) result() result { return result{rate: r.rate(), ops: len(r.samples), cpu: r.cpu} }

func (s *side) add(r result) {
	s.rates = append(s.rates, r.rate)
	s.cpuPerOps = append(s.cpuPerOps, perOp(r.cpu.self+r.cpu.server, r.ops))
	s.ops += r.ops
	s.cpu.self += r.cpu.self
	s.cpu.server += r.cpu.server
	s.cpu.client += r.cpu.client
}

// cpuPerOp is the CPU time of a request in microseconds, over all the side's rounds.
func (s *side) cpuPerOp() float64 { return perOp(s.cpu.self+s.cpu.server, s.ops) }

// selfCPUPerOp is cpuPerOp's share spent by this process, or by the process measured.
func (s *side) selfCPUPerOp() float64 { return perOp(s.cpu.self, s.ops) }

// serverCPUPerOp is cpuPerOp's share spent by the Postgres server.
func (s *side) serverCPUPerOp() float64 { return perOp(s.cpu.server, s.ops) }

// clientCPUPerOp is cpuPerOp's share spent by a load generator in a process of its own.
func (s *side) clientCPUPerOp() float64 { return perOp(s.cpu.client, s.ops) }

func perOp(d time.Duration, ops int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(max(ops, 1))
}

// cpuRatio compares two sides' CPU time per request like their rates: baseline's over
// value's, so 1 means the same cost and less than 1 that value's requests cost more.
func cpuRatio(value, baseline *side) float64 { return baseline.cpuPerOp() / value.cpuPerOp() }

// op is one request by client c. It reports whether the gate refused it; any error other
// than errExhausted aborts the round.
type op func(ctx context.Context, c int) (refused bool, err error)

// drive runs clients goroutines, each sending requests back to back with op, until d has
// passed (requests in flight then are finished and counted) or an op returns errExhausted.
func drive(ctx context.Context, clients int, d time.Duration, op op) (round, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var stop atomic.Bool
	per := make([][]sample, clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for !stop.Load() && time.Now().Before(deadline) {
				t0 := time.Now()
				refused, err := op(ctx, c)
				if err != nil {
					stop.Store(true)
					if !errors.Is(err, errExhausted) {
						cancel(err)
					}
					return
				}
				per[c] = append(per[c], sample{latency: time.Since(t0), refused: refused})
			}
		})
	}
	wg.Wait()
	r := round{elapsed: time.Since(start), samples: slices.Concat(per...)}
	if err := context.Cause(ctx); err != nil {
		return r, err
	}
	if len(r.samples) == 0 {
		return r, errors.New("no request was answered")
	}
	return r, nil
}

// driveCPU is drive, with the CPU time of the round recorded in it.
func (e *env) driveCPU(ctx context.Context, clients int, d time.Duration, op op) (round, error) {
	before, err := e.cpu.read()
	if err != nil {
		return round{}, err
	}
	r, err := drive(ctx, clients, d, op)
	if err != nil {
		return r, err
	}
	after, err := e.cpu.read()
	r.cpu = cpuTimes{self: after.self - before.self, server: after.server - before.server}
	return r, err
}

// pace sends requests with op at a steady rate per second for d, each at its planned time
// whether or not earlier ones were answered (an open loop: people signing in do not wait
// for each other, and a stalled server cannot hide its stall by slowing the load down).
// A sample's latency counts from the planned time. Client numbers go round 0..clients-1.
func pace(ctx context.Context, rate float64, clients int, d time.Duration, op op) (round, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	interval := time.Duration(float64(time.Second) / rate)
	n := max(1, int(d/interval))
	samples := make([]sample, n)
	answered := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		planned := start.Add(time.Duration(i) * interval)
		if wait := time.Until(planned); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			refused, err := op(ctx, i%clients)
			if err != nil {
				cancel(err)
				return
			}
			samples[i], answered[i] = sample{latency: time.Since(planned), refused: refused}, true
		})
	}
	wg.Wait()
	r := round{elapsed: time.Since(start)}
	for i, ok := range answered {
		if ok {
			r.samples = append(r.samples, samples[i])
		}
	}
	if err := context.Cause(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// alternate runs each side rounds times, forwards in even rounds and backwards in odd ones
// (a b, b a, a b...), so that a drift during the run (a warming cache, a growing table, a
// neighbour's load) weighs on every side alike.
func alternate(rounds int, sides ...func() error) error {
	for i := range rounds {
		for j := range sides {
			k := j
			if i%2 == 1 {
				k = len(sides) - 1 - j
			}
			if err := sides[k](); err != nil {
				return err
			}
		}
	}
	return nil
}

// warmUp runs each side once, unmeasured, unless the run skips warm-ups.
func (e *env) warmUp(sides ...func() error) error {
	if e.cfg.NoWarmup {
		return nil
	}
	if err := alternate(1, sides...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0 < p <= 100) of the latencies by the
// nearest-rank method, in milliseconds.
func percentile(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(lat))
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return float64(s[max(i, 0)]) / float64(time.Millisecond)
}
