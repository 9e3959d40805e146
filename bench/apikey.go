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

// apiKeys compares API-key-authenticated GET /api/me per second at concurrency apiKeyClients
// to the transactions per second of `pgbench -S` (one SELECT by primary key) with as many
// clients on the same cluster. The rounds alternate and last whole seconds, as pgbench -T
// counts them.
//
// The requests are sent by wrk (see wrk.go) when it is installed, and by the Go client in
// any case: the Go client's figure is a second row, and the first one when wrk is missing.
// The Go clients each have their own key and keep-alive connection. A further side, in the
// details, calls store.AuthenticateAPIKey directly from as many goroutines, without HTTP:
// it splits the gap to pgbench into the database's part and the HTTP layer's.
func (e *env) apiKeys(ctx context.Context) ([]Figure, error) {
	d := time.Duration(e.roundSeconds()) * time.Second
	goClient, withWrk, direct, theirs := &side{}, &side{}, &side{}, &side{}
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
	overWrk := func() (result, error) {
		return e.runWrk(ctx, e.gateOn.URL+"/api/me", e.people[0].APIKey, apiKeyClients, d)
	}
	inStore := func() (result, error) {
		r, err := e.driveCPU(ctx, apiKeyClients, d, func(ctx context.Context, c int) (bool, error) {
			_, err := e.gateOn.Store.AuthenticateAPIKey(ctx, e.people[c].APIKey)
			return false, err
		})
		return r.result(), err
	}
	pgbench := func() (result, error) { return e.pgbenchSelect(ctx) }
	warm := []func() error{run(nil, overHTTP), run(nil, inStore), run(nil, pgbench)}
	sides := []func() error{run(goClient, overHTTP), run(direct, inStore), run(theirs, pgbench)}
	if e.wrk != "" {
		warm = append([]func() error{run(nil, overWrk)}, warm...)
		sides = append([]func() error{run(withWrk, overWrk)}, sides...)
	}
	if err := e.warmUp(warm...); err != nil {
		return nil, err
	}
	if err := alternate(e.cfg.Rounds, sides...); err != nil {
		return nil, err
	}
	details := map[string]any{
		"clients":                             apiKeyClients,
		"pool_max_conns":                      e.gateOn.Store.Pool().Config().MaxConns,
		"pgx_exec_mode":                       e.gateOn.Store.Pool().Config().ConnConfig.DefaultQueryExecMode.String(),
		"pgbench":                             fmt.Sprintf("-S -c %d -j 2 -T %d, scale 1, simple protocol", apiKeyClients, e.roundSeconds()),
		"rounds_pgbench":                      theirs.rates,
		"rounds_go_client":                    goClient.rates,
		"rounds_store_direct":                 direct.rates,
		"go_client_vs_pgbench":                median(goClient.rates) / median(theirs.rates),
		"store_direct_vs_pgbench":             median(direct.rates) / median(theirs.rates),
		"cpu_us_per_op_go_client":             goClient.cpuPerOp(),
		"cpu_us_per_op_store_direct":          direct.cpuPerOp(),
		"cpu_us_per_op_pgbench":               theirs.cpuPerOp(),
		"postgres_cpu_us_per_op_go_client":    goClient.serverCPUPerOp(),
		"postgres_cpu_us_per_op_store_direct": direct.serverCPUPerOp(),
		"postgres_cpu_us_per_op_pgbench":      theirs.serverCPUPerOp(),
		"pgbench_cpu_us_per_op":               theirs.clientCPUPerOp(),
	}
	name := func(generator string) string {
		return fmt.Sprintf("GET /api/me with an API key/s (%s) / pgbench -S tps, c=%d", generator, apiKeyClients)
	}
	primary, primaryName := goClient, name("Go client, no wrk")
	if e.wrk != "" {
		primary, primaryName = withWrk, name("wrk")
		details["wrk"] = fmt.Sprintf("-t 2 -c %d -d %ds, one key", apiKeyClients, e.roundSeconds())
		details["rounds_wrk"] = withWrk.rates
		details["cpu_us_per_op_wrk"] = withWrk.cpuPerOp()
		details["postgres_cpu_us_per_op_wrk"] = withWrk.serverCPUPerOp()
		details["wrk_cpu_us_per_op"] = withWrk.clientCPUPerOp()
	}
	f := newFigure("apikey_vs_pgbench", primaryName, "/s", median(primary.rates), median(theirs.rates), apiKeyGoal, details)
	f.CPURatio = cpuRatio(primary, theirs)
	g := newFigure("apikey_go_client_vs_pgbench", name("Go client"), "/s", median(goClient.rates),
		median(theirs.rates), apiKeyGoal, map[string]any{"see": "apikey_vs_pgbench"})
	g.CPURatio = cpuRatio(goClient, theirs)
	return []Figure{f, g}, nil
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
		return result{rate: rate, ops: ops, cpu: cpuTimes{self: client, server: after.server - before.server, client: client}}, nil
	}
}

// roundSeconds is cfg.Round rounded up to whole seconds, at least two (see pgbenchAttempts).
func (e *env) roundSeconds() int {
	return max(2, int(math.Ceil(e.cfg.Round.Seconds())))
}
