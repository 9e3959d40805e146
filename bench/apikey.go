package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// apiKeyGoal: an API-key request may cost at most 1/0.6 of a bare primary-key SELECT.
var apiKeyGoal = AtLeast(0.6)

// pgbenchTPS finds pgbench's figure in its report.
var pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

// apiKeys compares API-key-authenticated GET /api/me per second, sent by apiKeyClients
// clients each on its own keep-alive connection and with its own key, to the transactions
// per second of `pgbench -S` (one SELECT by primary key) with as many clients on the same
// cluster. The rounds alternate and last whole seconds, as pgbench -T counts them.
//
// A third side, in the details, calls store.AuthenticateAPIKey directly from as many
// goroutines, without HTTP: it splits the gap to pgbench into the database's part and the
// HTTP layer's (server and load generator, which share the machine's cores).
func (e *env) apiKeys(ctx context.Context) (Figure, error) {
	d := time.Duration(e.roundSeconds()) * time.Second
	ours, direct, theirs := &side{}, &side{}, &side{}
	run := func(into *side, measure func() (result, error)) func() error {
		return func() error {
			r, err := measure()
			if into != nil {
				into.add(r)
			}
			return err
		}
	}
	overHTTP := func() (result, error) {
		r, err := e.driveCPU(ctx, apiKeyClients, d, func(ctx context.Context, c int) (bool, error) {
			resp, err := e.client.do(ctx, http.MethodGet, e.gateOn.URL+"/api/me", nil, bearer(e.people[c].APIKey))
			if err != nil {
				return false, err
			}
			if resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("GET /api/me with an API key: got %d, want 200", resp.StatusCode)
			}
			return false, nil
		})
		return r.result(), err
	}
	inStore := func() (result, error) {
		r, err := e.driveCPU(ctx, apiKeyClients, d, func(ctx context.Context, c int) (bool, error) {
			_, err := e.gateOn.Store.AuthenticateAPIKey(ctx, e.people[c].APIKey)
			return false, err
		})
		return r.result(), err
	}
	pgbench := func() (result, error) { return e.pgbenchSelect(ctx) }
	if err := e.warmUp(run(nil, overHTTP), run(nil, inStore), run(nil, pgbench)); err != nil {
		return Figure{}, err
	}
	if err := alternate(e.cfg.Rounds, run(ours, overHTTP), run(direct, inStore), run(theirs, pgbench)); err != nil {
		return Figure{}, err
	}
	f := newFigure("apikey_vs_pgbench", fmt.Sprintf("GET /api/me with an API key/s / pgbench -S tps, c=%d", apiKeyClients),
		"/s", median(ours.rates), median(theirs.rates), apiKeyGoal, map[string]any{
			"clients":                             apiKeyClients,
			"pgbench":                             fmt.Sprintf("-S -c %d -j 2 -T %d, scale 1, simple protocol", apiKeyClients, e.roundSeconds()),
			"rounds_api":                          ours.rates,
			"rounds_pgbench":                      theirs.rates,
			"rounds_store_direct":                 direct.rates,
			"store_direct_vs_pgbench":             median(direct.rates) / median(theirs.rates),
			"cpu_us_per_op_api":                   ours.cpuPerOp(),
			"cpu_us_per_op_store_direct":          direct.cpuPerOp(),
			"cpu_us_per_op_pgbench":               theirs.cpuPerOp(),
			"postgres_cpu_us_per_op_api":          ours.serverCPUPerOp(),
			"postgres_cpu_us_per_op_store_direct": direct.serverCPUPerOp(),
			"postgres_cpu_us_per_op_pgbench":      theirs.serverCPUPerOp(),
		})
	f.CPURatio = cpuRatio(ours, theirs)
	return f, nil
}

// pgbenchProcessed finds how many transactions pgbench ran.
var pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)

// pgbenchAttempts bounds the runs of one pgbench round: on a busy machine, opening its 32
// connections can take the whole -T duration, and such a run counts no transaction at all.
const pgbenchAttempts = 3

// pgbenchSelect runs `pgbench -S` for one round and returns its transactions per second,
// how many it ran, and the CPU time they cost pgbench and the server (connecting included).
func (e *env) pgbenchSelect(ctx context.Context) (result, error) {
	args := []string{"-n", "-S", "-c", strconv.Itoa(apiKeyClients), "-j", "2", "-T", strconv.Itoa(e.roundSeconds())}
	for attempt := 1; ; attempt++ {
		before, err := e.cpu.read()
		if err != nil {
			return result{}, err
		}
		out, client, err := e.runPgbench(ctx, args...)
		if err != nil {
			return result{}, fmt.Errorf("pgbench -S: %w\n%s", err, out)
		}
		after, err := e.cpu.read()
		if err != nil {
			return result{}, err
		}
		n := pgbenchProcessed.FindSubmatch(out)
		if n == nil {
			return result{}, fmt.Errorf("pgbench -S: no transaction count in its report:\n%s", out)
		}
		ops, err := strconv.Atoi(string(n[1]))
		if err != nil {
			return result{}, fmt.Errorf("pgbench -S: transactions: %w", err)
		}
		if ops == 0 && attempt < pgbenchAttempts {
			e.cfg.progressf("pgbench -S ran no transaction in %ds (connecting took that long); running it again", e.roundSeconds())
			continue
		}
		tps := pgbenchTPS.FindSubmatch(out)
		if tps == nil {
			return result{}, fmt.Errorf("pgbench -S: no tps in its report after %d attempts:\n%s", attempt, out)
		}
		rate, err := strconv.ParseFloat(string(tps[1]), 64)
		if err != nil {
			return result{}, fmt.Errorf("pgbench -S: tps: %w", err)
		}
		return result{rate: rate, ops: ops, cpu: cpuTimes{self: client, server: after.server - before.server}}, nil
	}
}

// roundSeconds is cfg.Round rounded up to whole seconds, at least two (see pgbenchAttempts).
func (e *env) roundSeconds() int {
	return max(2, int(math.Ceil(e.cfg.Round.Seconds())))
}
