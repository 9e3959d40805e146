package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// The ingest side (issue 38): Alertmanager's notifications sent to POST /api/webhooks/alertmanager
// of the terdut-server process (e.server: the binary this run built, its install claimed, an
// integration made through POST /api/integrations) and of the floor (bench/floor/webhook.go: the
// body decoded, one bulk upsert by (integration, fingerprint) into a table shaped like alerts),
// in alternating rounds on the same Postgres with the same client load. Figures:
//
//   - the mix: Config.IngestGroups groups of Config.IngestAlerts alerts, ingestClients at once,
//     each group in turn new (firing from a new startsAt), refreshed (the same body again),
//     resolved, and replayed (the resolution again, unchanged): alerts/s, server over floor;
//   - replays: each group's firing notification sent again, unchanged: alerts/s, server over floor;
//   - the storm: one notification of Config.IngestStorm alerts in one new group: the time to
//     store it, server over floor; the process's peak memory over it (VmHWM), server over
//     floor; and GET /api/incidents/{id} of its incident, over terdut-tui's 10 s timeout.

// The ingest side's goals.
var (
	ingestMixGoal    = AtLeast(0.8)
	ingestReplayGoal = AtLeast(1)
	ingestStormGoal  = AtMost(3)
	// The incident of a storm must open well inside the client's timeout: a tenth of it.
	ingestReadGoal = AtMost(0.1)
)

const (
	ingestClients = 4
	// clientTimeout is terdut-tui's bound on every request (the incident contract).
	clientTimeout = 10 * time.Second
	// ingestMaxNotifications bounds a round in count, whatever its time.
	ingestMaxNotifications = 100_000
	// floorAlertsTable is the floor's table (bench/floor/webhook.go names it too).
	floorAlertsTable = "bench_floor_alerts"
)

// ingestRun is what the ingest side's measurements share.
type ingestRun struct {
	e      *env
	hc     *http.Client
	key    string // the integration's key, sent to the server and the floor alike
	reader string // a person's API key, to read the storm's incident
	groups []*amGroup
	next   []int     // by group: its next cycle, the offset of its next startsAt
	base   time.Time // the startsAt of cycle 0
	cycles map[*process]*atomic.Int64
	sent   map[*process][]atomic.Bool // by group: the mix sent it a whole cycle
}

// ingest measures the ingest side's figures (see the comment at the top of this file).
func (e *env) ingest(tb testing.TB, ctx context.Context) ([]Figure, error) {
	tb.Helper()
	in, err := e.newIngestRun(tb, ctx)
	if err != nil {
		return nil, err
	}
	e.cfg.progressf("ingest: the mix of %d groups of %d alerts, %d rounds a side", len(in.groups), len(in.groups[0].alerts), e.cfg.KeyRounds)
	mix, err := in.mix(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: the mix: %w", err)
	}
	e.cfg.progressf("ingest: replayed notifications, %d rounds a side", e.cfg.KeyRounds)
	replay, err := in.replay(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: replays: %w", err)
	}
	e.cfg.progressf("ingest: storms of %d alerts, %d rounds a side", e.cfg.IngestStorm, e.cfg.Rounds)
	storm, err := in.storm(ctx)
	if err != nil {
		return nil, fmt.Errorf("ingest: the storm: %w", err)
	}
	return append([]Figure{mix, replay}, storm...), nil
}

// newIngestRun makes the floor's table, an admin, and the integration (through the server's
// API), and checks that the server and the floor both refuse an unknown key.
func (e *env) newIngestRun(tb testing.TB, ctx context.Context) (*ingestRun, error) {
	tb.Helper()
	conn, err := pgx.Connect(ctx, e.cluster.URL(appDB))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// LIKE ... INCLUDING ALL copies the columns, defaults, checks, identity and indexes; the
	// foreign key to integrations is alerts' other cost of a new row.
	if _, err := conn.Exec(ctx, `CREATE TABLE `+floorAlertsTable+` (LIKE alerts INCLUDING ALL);
		ALTER TABLE `+floorAlertsTable+` ADD FOREIGN KEY (integration_id) REFERENCES integrations (id)`); err != nil {
		return nil, fmt.Errorf("create the floor's table: %w", err)
	}
	in := &ingestRun{e: e, hc: newIngestClient(), reader: e.people[0].APIKey,
		base:   time.Now().UTC().Truncate(time.Second).Add(-24 * time.Hour),
		cycles: map[*process]*atomic.Int64{e.server: {}, e.floor: {}}}
	in.sent = map[*process][]atomic.Bool{e.server: make([]atomic.Bool, e.cfg.IngestGroups), e.floor: make([]atomic.Bool, e.cfg.IngestGroups)}
	for g := range e.cfg.IngestGroups {
		in.groups = append(in.groups, newGroup("BenchDiskFull", fmt.Sprintf("mix-%02d", g), e.cfg.IngestAlerts))
	}
	in.next = make([]int, len(in.groups))

	admin := apitest.MustPerson(tb, e.gateOn.Store, "bench-ingest-admin", store.RoleAdmin)
	status, b, err := call(ctx, in.hc, http.MethodPost, e.server.URL+"/api/integrations", admin.APIKey, []byte(`{"name":"bench"}`))
	if err != nil {
		return nil, err
	}
	var made struct {
		Keys []struct{ Key string } `json:"keys"`
	}
	if err := json.Unmarshal(b, &made); status != http.StatusCreated || err != nil || len(made.Keys) != 1 || made.Keys[0].Key == "" {
		return nil, fmt.Errorf("POST /api/integrations: got %d %s, want 201 with a key", status, b)
	}
	in.key = made.Keys[0].Key

	check, err := newGroup("BenchCheck", "check", 1).body(in.base, false)
	if err != nil {
		return nil, err
	}
	for _, p := range []*process{e.server, e.floor} {
		unknown := "terdut_am_" + strings.Repeat("0", 64)
		if status, b, err := call(ctx, in.hc, http.MethodPost, p.URL+"/api/webhooks/alertmanager", unknown, check); err != nil || status != http.StatusUnauthorized {
			return nil, fmt.Errorf("%s: an unknown key: got %d %s (%v), want 401", p.name, status, b, err)
		}
		if _, err := send(ctx, in.hc, p, in.key, check, 1); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// mix measures the mix of new, refreshed, resolved and replayed notifications, then checks
// that both sides stored what they were sent.
func (in *ingestRun) mix(ctx context.Context) (Figure, error) {
	cycle := func(p *process) func(context.Context, int) (int, error) {
		return func(ctx context.Context, g int) (int, error) {
			group := in.groups[g]
			starts := in.base.Add(time.Duration(in.next[g]) * time.Second)
			in.next[g]++
			firing, err := group.body(starts, false)
			if err != nil {
				return 0, err
			}
			resolved, err := group.body(starts, true)
			if err != nil {
				return 0, err
			}
			for _, b := range [][]byte{firing, firing, resolved, resolved} {
				if _, err := send(ctx, in.hc, p, in.key, b, len(group.alerts)); err != nil {
					return 0, err
				}
			}
			in.cycles[p].Add(1)
			in.sent[p][g].Store(true)
			return 4 * len(group.alerts), nil
		}
	}
	server, floor, err := in.alternate(ctx, cycle)
	if err != nil {
		return Figure{}, err
	}
	if err := in.checkMix(ctx); err != nil {
		return Figure{}, err
	}
	f := newFigure("ingest_mix", fmt.Sprintf("alerts/s of new, refreshed, resolved and replayed notifications, server / floor, %d groups of %d, c=%d",
		len(in.groups), len(in.groups[0].alerts), ingestClients), "/s", mean(server.rates), mean(floor.rates), ingestMixGoal,
		in.details(server, floor, map[string]any{"notifications_of_a_group_cycle": "new (firing, a new startsAt), refreshed (the same body again), resolved, replayed (the resolution again)"}))
	f.CPURatio = mean(floor.cpuPerOps) / mean(server.cpuPerOps)
	return f, nil
}

// replay sends each group a new firing notification (untimed, the same body to both sides),
// then measures that body sent again and again, unchanged.
func (in *ingestRun) replay(ctx context.Context) (Figure, error) {
	bodies := make([][]byte, len(in.groups))
	for g, group := range in.groups {
		b, err := group.body(in.base.Add(time.Duration(in.next[g])*time.Second), false)
		if err != nil {
			return Figure{}, err
		}
		in.next[g]++
		bodies[g] = b
		for _, p := range []*process{in.e.server, in.e.floor} {
			if _, err := send(ctx, in.hc, p, in.key, b, len(group.alerts)); err != nil {
				return Figure{}, err
			}
		}
	}
	again := func(p *process) func(context.Context, int) (int, error) {
		return func(ctx context.Context, g int) (int, error) {
			n := len(in.groups[g].alerts)
			_, err := send(ctx, in.hc, p, in.key, bodies[g], n)
			return n, err
		}
	}
	server, floor, err := in.alternate(ctx, again)
	if err != nil {
		return Figure{}, err
	}
	f := newFigure("ingest_replay", fmt.Sprintf("alerts/s of replayed unchanged notifications of firing groups, server / floor, %d groups of %d, c=%d",
		len(in.groups), len(in.groups[0].alerts), ingestClients), "/s", mean(server.rates), mean(floor.rates), ingestReplayGoal,
		in.details(server, floor, nil))
	f.CPURatio = mean(floor.cpuPerOps) / mean(server.cpuPerOps)
	return f, nil
}

// alternate runs a warm-up round a side, then Config.KeyRounds rounds a side, alternating
// (server floor, floor server, ...), each sending the groups' notifications with do.
func (in *ingestRun) alternate(ctx context.Context, do func(p *process) func(context.Context, int) (int, error)) (server, floor *side, err error) {
	server, floor = &side{}, &side{}
	run := func(p *process, into *side) func() error {
		return func() error {
			r, err := in.e.groupRound(ctx, p, len(in.groups), do(p))
			if into != nil {
				into.add(r)
			}
			return err
		}
	}
	if err := in.e.warmUp(run(in.e.server, nil), run(in.e.floor, nil)); err != nil {
		return nil, nil, err
	}
	err = alternate(in.e.cfg.KeyRounds, run(in.e.server, server), run(in.e.floor, floor))
	return server, floor, err
}

// groupRound runs ingestClients clients against p's groups with driveGroups for Config.Round,
// or until the round has sent ingestMaxNotifications. It returns what do counted a second (the
// ingest side's alerts) and the CPU time of p and Postgres.
func (e *env) groupRound(ctx context.Context, p *process, groups int, do func(context.Context, int) (int, error)) (result, error) {
	before, err := e.cpu.read()
	if err != nil {
		return result{}, err
	}
	pBefore, err := p.cpu()
	if err != nil {
		return result{}, err
	}
	n, elapsed, err := driveGroups(ctx, ingestClients, groups, e.cfg.Round, ingestMaxNotifications, do)
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
	return result{rate: float64(n) / elapsed.Seconds(), ops: n,
		cpu: cpuTimes{self: pAfter - pBefore, server: after.server - before.server}}, nil
}

// driveGroups runs clients clients over groups groups, client c owning groups c, c+clients, ...:
// each sends do for its groups in turn (a group's notifications stay in order, as Alertmanager
// sends them) until d has passed, finishing the group in hand, or the clients have made maxCalls
// calls of do. It returns the sum of what do returned and the time taken.
func driveGroups(ctx context.Context, clients, groups int, d time.Duration, maxCalls int64, do func(context.Context, int) (int, error)) (int, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var done, calls atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := range min(clients, groups) {
		wg.Go(func() {
			for g, first := c, true; first || time.Now().Before(deadline) && calls.Load() < maxCalls && ctx.Err() == nil; first = false {
				n, err := do(ctx, g)
				if err != nil {
					cancel(err)
					return
				}
				done.Add(int64(n))
				calls.Add(1)
				if g += clients; g >= groups {
					g = c
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, elapsed, err
	}
	return int(done.Load()), elapsed, nil
}

// checkMix checks that the mix left what it sent: on the server, every group's alerts resolved
// and one incident a cycle, each of all the group's alerts and resolved; on the floor, every
// group's alerts resolved.
func (in *ingestRun) checkMix(ctx context.Context) error {
	// The groups each side was sent: every client sends its groups in turn for as long as a round
	// lasts, so a short round on a busy machine may not reach them all.
	sentTo := func(p *process) (keys, fps []string) {
		for g, group := range in.groups {
			if in.sent[p][g].Load() {
				keys, fps = append(keys, group.key()), append(fps, group.fps...)
			}
		}
		return keys, fps
	}
	pool := in.e.gateOn.Store.Pool()
	keys, _ := sentTo(in.e.server)
	var incidents, wrong int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE resolved_at IS NULL OR alert_count <> $2)
		FROM incidents WHERE group_key = ANY($1)`, keys, len(in.groups[0].alerts)).Scan(&incidents, &wrong); err != nil {
		return err
	}
	if want := in.cycles[in.e.server].Load(); incidents != want || wrong != 0 || want == 0 {
		return fmt.Errorf("the server holds %d incidents of the mix's groups, %d of them open or not of every alert; want %d, all resolved",
			incidents, wrong, want)
	}
	for table, p := range map[string]*process{"alerts": in.e.server, floorAlertsTable: in.e.floor} {
		_, fps := sentTo(p)
		var rows, resolved int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'resolved') FROM `+table+
			` WHERE fingerprint = ANY($1)`, fps).Scan(&rows, &resolved); err != nil {
			return err
		}
		if rows != len(fps) || resolved != len(fps) || len(fps) == 0 {
			return fmt.Errorf("%s holds %d rows of the alerts of the mix's groups it was sent, %d resolved; want %d, all resolved",
				table, rows, resolved, len(fps))
		}
	}
	return nil
}

// details are the rounds and CPU split of a rate figure of the ingest side.
func (in *ingestRun) details(server, floor *side, extra map[string]any) map[string]any {
	d := map[string]any{
		"groups": len(in.groups), "alerts_a_group": len(in.groups[0].alerts), "clients": ingestClients,
		"round": in.e.cfg.Round.String(), "rounds": in.e.cfg.KeyRounds,
		"rounds_server": server.rates, "rounds_floor": floor.rates,
		"median_server": median(server.rates), "median_floor": median(floor.rates),
		"cpu_us_per_alert_rounds_server": server.cpuPerOps, "cpu_us_per_alert_rounds_floor": floor.cpuPerOps,
		"process_cpu_us_per_alert_server": server.selfCPUPerOp(), "process_cpu_us_per_alert_floor": floor.selfCPUPerOp(),
		"postgres_cpu_us_per_alert_server": server.serverCPUPerOp(), "postgres_cpu_us_per_alert_floor": floor.serverCPUPerOp(),
		"load": "a Go loop in the bench's process, keep-alive connections to 127.0.0.1, not counted in the CPU figures",
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

// mean returns the mean of xs.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

var errNoIncident = errors.New("the storm's notification answered no incident")
