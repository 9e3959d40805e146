package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The API-key goals: the server may cost at most 5% over the floor, in rate and in CPU.
var (
	floorGoal    = AtLeast(0.95)
	floorCPUGoal = AtMost(1.05)
)

// apiKeyConcurrencies are the numbers of connections the API-key figures are measured at.
var apiKeyConcurrencies = []int{8, 32}

// pgbenchTPS finds pgbench's figure in its report.
var pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

// apiKeys measures API-key-authenticated GET /api/me on the terdut-server process against the
// floor process, and against `pgbench -S -M prepared` (one SELECT by primary key, prepared, as
// pgx prepares the server's), and against itself with the access log off (the log's own
// cost), at each of apiKeyConcurrencies. At one concurrency, the four
// sides run in alternating rounds of whole seconds (as pgbench -T counts them); wrk sends the
// requests with one key on every connection. It returns the rate and CPU figures of every
// concurrency, then the ceilings (the rate over pgbench's).
func (e *env) apiKeys(ctx context.Context) ([]Figure, error) {
	if e.wrk == "" {
		return nil, fmt.Errorf("wrk is not installed (scripts/ensure-wrk.sh installs it): the API-key figures need a load generator outside this process")
	}
	var figures, ceilings []Figure
	for _, c := range apiKeyConcurrencies {
		fs, ceiling, err := e.apiKeysAt(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("c=%d: %w", c, err)
		}
		figures, ceilings = append(figures, fs...), append(ceilings, ceiling)
	}
	return append(figures, ceilings...), nil
}

func (e *env) apiKeysAt(ctx context.Context, clients int) (figures []Figure, ceiling Figure, err error) {
	d := time.Duration(e.roundSeconds()) * time.Second
	server, floor, pgbench, noAccess := &side{}, &side{}, &side{}, &side{}
	run := func(into *side, measure func() (result, error)) func() error {
		return func() error {
			r, err := measure()
			if into != nil {
				into.add(r)
			}
			return err
		}
	}
	me := func(p *process) func() (result, error) {
		return func() (result, error) { return e.wrkMe(ctx, p, clients, d) }
	}
	prepared := func() (result, error) { return e.pgbenchSelect(ctx, clients) }
	if err := e.warmUp(run(nil, me(e.server)), run(nil, me(e.floor)), run(nil, prepared), run(nil, me(e.noAccessLog))); err != nil {
		return nil, Figure{}, err
	}
	if err := alternate(e.cfg.KeyRounds, run(server, me(e.server)), run(floor, me(e.floor)), run(pgbench, prepared),
		run(noAccess, me(e.noAccessLog))); err != nil {
		return nil, Figure{}, err
	}
	details := map[string]any{
		"clients":                      clients,
		"wrk":                          fmt.Sprintf("-t 2 -c %d -d %ds, one key", clients, e.roundSeconds()),
		"pgbench":                      fmt.Sprintf("-n -S -M prepared -c %d -j 2 -T %d, scale 1", clients, e.roundSeconds()),
		"rounds_server":                server.rates,
		"rounds_floor":                 floor.rates,
		"rounds_pgbench":               pgbench.rates,
		"rounds_server_access_log_off": noAccess.rates,
		"cpu_us_per_op_rounds_server_access_log_off":  noAccess.cpuPerOps,
		"process_cpu_us_per_op_server_access_log_off": noAccess.selfCPUPerOp(),
		"cpu_us_per_op_rounds_server":                 server.cpuPerOps,
		"cpu_us_per_op_rounds_floor":                  floor.cpuPerOps,
		"process_cpu_us_per_op_server":                server.selfCPUPerOp(),
		"process_cpu_us_per_op_floor":                 floor.selfCPUPerOp(),
		"postgres_cpu_us_per_op_server":               server.serverCPUPerOp(),
		"postgres_cpu_us_per_op_floor":                floor.serverCPUPerOp(),
		"postgres_cpu_us_per_op_pgbench":              pgbench.serverCPUPerOp(),
		"wrk_cpu_us_per_op_server":                    server.clientCPUPerOp(),
		"wrk_cpu_us_per_op_floor":                     floor.clientCPUPerOp(),
		"pgbench_cpu_us_per_op":                       pgbench.clientCPUPerOp(),
		"pool_max_conns_server_and_floor":             e.poolMaxConns,
		"server_and_floor_pgx_exec_mode":              "cache_statement (pgx's default)",
		"cpu_us_per_op_definition":                    "the server's (or floor's) process and Postgres; wrk's apart",
		"cpu_us_per_op_pgbench_definition":            "pgbench's process and Postgres",
	}
	rate := newFigure(fmt.Sprintf("apikey_vs_floor_c%d", clients),
		fmt.Sprintf("GET /api/me with an API key/s, server / floor, c=%d", clients), "/s",
		median(server.rates), median(floor.rates), floorGoal, details)
	rate.CPURatio = median(floor.cpuPerOps) / median(server.cpuPerOps)
	cpu := newFigure(fmt.Sprintf("apikey_cpu_vs_floor_c%d", clients),
		fmt.Sprintf("CPU us per GET /api/me, server+Postgres / floor+Postgres, c=%d", clients), "us",
		median(server.cpuPerOps), median(floor.cpuPerOps), floorCPUGoal, map[string]any{"see": rate.Key})
	ceiling = newFigure(fmt.Sprintf("apikey_vs_pgbench_c%d", clients),
		fmt.Sprintf("GET /api/me with an API key/s / pgbench -S -M prepared tps, c=%d", clients), "/s",
		median(server.rates), median(pgbench.rates), Goal{}, map[string]any{"see": rate.Key,
			"cpu_ratio_definition": "pgbench+Postgres per transaction over server+Postgres+wrk per request"})
	ceiling.CPURatio = pgbench.cpuPerOp() / (server.cpuPerOp() + server.clientCPUPerOp())
	access, accessCPU := accessLogFigures(clients, server, noAccess, rate.Key)
	return []Figure{rate, cpu, access, accessCPU}, ceiling, nil
}

// accessLogFigures are the access log's own cost at one concurrency: the server with its
// defaults (the access log on) over the same binary with --access-log=false, in the same
// alternating rounds. They have no goal of their own: the server's goal against the floor
// holds with the access log on.
func accessLogFigures(clients int, on, off *side, see string) (rate, cpu Figure) {
	rate = newFigure(fmt.Sprintf("apikey_access_log_c%d", clients),
		fmt.Sprintf("GET /api/me with an API key/s, access log on / off, c=%d", clients), "/s",
		median(on.rates), median(off.rates), Goal{}, map[string]any{"see": see})
	rate.CPURatio = median(off.cpuPerOps) / median(on.cpuPerOps)
	cpu = newFigure(fmt.Sprintf("apikey_access_log_cpu_c%d", clients),
		fmt.Sprintf("CPU us per GET /api/me, access log on / off, c=%d", clients), "us",
		median(on.cpuPerOps), median(off.cpuPerOps), Goal{}, map[string]any{"see": see})
	return rate, cpu
}

// wrkMe sends GET /api/me with an API key to p from clients connections for d, and returns
// the rate and the CPU time p, Postgres and wrk used.
func (e *env) wrkMe(ctx context.Context, p *process, clients int, d time.Duration) (result, error) {
	before, err := e.cpu.read()
	if err != nil {
		return result{}, err
	}
	pBefore, err := p.cpu()
	if err != nil {
		return result{}, err
	}
	out, wrkCPU, err := e.runWrk(ctx, p.URL+"/api/me", clients, d, "-H", "Authorization: Bearer "+e.people[0].APIKey)
	if err != nil {
		return result{}, err
	}
	pAfter, err := p.cpu()
	if err != nil {
		return result{}, err
	}
	after, err := e.cpu.read()
	if err != nil {
		return result{}, err
	}
	r, err := parseWrk(out)
	if err != nil {
		return result{}, fmt.Errorf("wrk GET %s/api/me: %w\n%s", p.name, err, out)
	}
	r.cpu = cpuTimes{self: pAfter - pBefore, server: after.server - before.server, client: wrkCPU}
	if r.cpu.self < 0 || r.cpu.server < 0 {
		return result{}, fmt.Errorf("wrk GET %s/api/me: CPU time went backwards (process %s, Postgres %s): the harness miscounted",
			p.name, r.cpu.self, r.cpu.server)
	}
	return r, nil
}

// pgbenchProcessed finds how many transactions pgbench ran.
var pgbenchProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)

// pgbenchAttempts bounds the runs of one pgbench round: on a busy machine, opening its
// connections can take the whole -T duration, and such a run counts no transaction at all.
const pgbenchAttempts = 3

// pgbenchSelect runs `pgbench -S -M prepared` with clients connections for one round and
// returns its transactions per second, how many it ran, and the CPU time they cost pgbench
// and the server (connecting included).
func (e *env) pgbenchSelect(ctx context.Context, clients int) (result, error) {
	args := []string{"-n", "-S", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(e.roundSeconds())}
	for attempt := 1; ; attempt++ {
		backends, err := e.cpu.backends()
		if err != nil {
			return result{}, err
		}
		before, err := e.cpu.read()
		if err != nil {
			return result{}, err
		}
		out, client, err := e.runPgbench(ctx, args...)
		if err != nil {
			return result{}, fmt.Errorf("pgbench -S: %w\n%s", err, out)
		}
		// pgbench's backends end after it does: their exit is pgbench's cost, and the next
		// round (another side's) starts once they are gone.
		if settled, err := e.cpu.settle(backends, 5*time.Second); err != nil {
			return result{}, err
		} else if !settled {
			e.cfg.progressf("pgbench -S: Postgres still had backends of its connections after 5s; measuring on")
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

// checkFloor makes sure the floor does the server's work before it is measured against it:
// for a live key, the same status, body and headers as the server's GET /api/me; for a
// revoked key, an expired one and an unknown one, 401 from both.
func (e *env) checkFloor(tb testing.TB) error {
	tb.Helper()
	ctx := tb.Context()
	get := func(p *process, key string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/me", nil)
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := e.client.hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	live := e.people[0].APIKey
	revoked, err := e.revokedKey(ctx, e.people[1].User.ID)
	if err != nil {
		return err
	}
	expired, err := e.expiredKey(ctx, e.people[1].User.ID)
	if err != nil {
		return err
	}
	unknown := strings.Repeat("0", 64)
	for _, key := range []string{live, revoked, expired, unknown} {
		want := http.StatusOK
		if key != live {
			want = http.StatusUnauthorized
		}
		sr, sbody, err := get(e.server, key)
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		fr, fbody, err := get(e.floor, key)
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		if sr.StatusCode != want || fr.StatusCode != want {
			return fmt.Errorf("got %d from the server and %d from the floor, want %d from both", sr.StatusCode, fr.StatusCode, want)
		}
		if want != http.StatusOK {
			continue
		}
		if !bytes.Equal(sbody, fbody) {
			return fmt.Errorf("bodies differ:\nserver %s\nfloor  %s", sbody, fbody)
		}
		for _, h := range []string{"Content-Type", "X-Content-Type-Options"} {
			if sr.Header.Get(h) != fr.Header.Get(h) {
				return fmt.Errorf("%s: got %q from the server and %q from the floor", h, sr.Header.Get(h), fr.Header.Get(h))
			}
		}
	}
	return nil
}

// revokedKey creates a key for the user and revokes it.
func (e *env) revokedKey(ctx context.Context, userID int64) (string, error) {
	k, secret, err := e.gateOn.Store.CreateAPIKey(ctx, userID, "revoked")
	if err != nil {
		return "", err
	}
	return secret, e.gateOn.Store.RevokeAPIKey(ctx, userID, k.ID)
}

// expiredKey creates a key for the user that expired a minute ago.
func (e *env) expiredKey(ctx context.Context, userID int64) (string, error) {
	past := time.Now().Add(-time.Minute)
	_, secret, err := e.gateOn.Store.IssueAPIKey(ctx, store.NewAPIKey{UserID: userID, Name: "expired", ExpiresAt: &past},
		store.APIKeyLimits{})
	return secret, err
}
