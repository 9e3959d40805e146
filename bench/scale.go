package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The scale side (issue 32): the same endpoints over a database of scaleSmall people and one of
// Config.ScalePeople (a million in `make bench`), side by side in alternating rounds, each
// database served by a terdut-server process of its own. Every figure is the large side's
// over the small side's: a rate that does not drop with the size of the tables is ≥ 0.9, and
// the server's peak memory while it answers the whole user list stays within 1.2 times.

// scaleSmall is the number of people of the baseline side.
const scaleSmall = 1000

// The scale side's goals.
var (
	scaleRateGoal   = AtLeast(0.9)
	scaleMemoryGoal = AtMost(1.2)
)

// scaleClients is wrk's connections for the scale side's rates.
const scaleClients = 8

// scaleSide is one database of the scale side and the server process over it.
type scaleSide struct {
	*scaleDB
	proc *process
}

func (s *scaleSide) server() *process { return s.proc }

// scaleSetup checks that wrk is at hand for a half of the scale side and builds the server; the
// size of its large side is configured, or a million.
func (e *env) scaleSetup(tb testing.TB, configured int) (large int, serverBin string, err error) {
	tb.Helper()
	if e.wrk == "" {
		return 0, "", errors.New("wrk is not installed (scripts/ensure-wrk.sh installs it): the scale figures need a load generator outside this process")
	}
	large = configured
	if large <= 0 {
		large = 1_000_000
	}
	serverBin, _ = buildBinaries(tb)
	return large, serverBin, nil
}

// withDetails returns what adds a figure's own details to the details every figure of a side
// shares.
func withDetails(shared map[string]any) func(map[string]any) map[string]any {
	return func(extra map[string]any) map[string]any {
		m := maps.Clone(shared)
		maps.Copy(m, extra)
		return m
	}
}

// scale measures the scale side's figures (see the comment at the top of this file).
func (e *env) scale(tb testing.TB, ctx context.Context) ([]Figure, error) {
	tb.Helper()
	large, serverBin, err := e.scaleSetup(tb, e.cfg.ScalePeople)
	if err != nil {
		return nil, err
	}
	var sides [2]*scaleSide
	for i, people := range []int{scaleSmall, large} {
		e.cfg.progressf("scale: loading %d people (each with an API key, a live session and two audit rows)", people)
		db, err := newScaleDB(tb, ctx, e.cluster, fmt.Sprintf("scale_%d", people), people)
		if err != nil {
			return nil, err
		}
		e.cfg.progressf("scale: %d people loaded in %s (%s)", people, db.loaded.Round(100*time.Millisecond), db.steps)
		env := []string{"TERDUT_DATABASE_URL=" + db.url, "TERDUT_PASSWORD_HASH_COST=4"}
		// No sweep of its own during the run: the bench times the sweep itself. No limit on
		// sign-ins per client address: wrk sends them all from 127.0.0.1, and the figure is
		// about the database's work for a sign-in, the same on either side.
		proc := startProcess(tb, fmt.Sprintf("terdut-server over %d people", people), serverBin, true, env,
			"--sweep-interval", "24h", "--login-rate-per-ip", "0")
		sides[i] = &scaleSide{scaleDB: db, proc: proc}
	}
	small, big := sides[0], sides[1]
	details := withDetails(map[string]any{"people_small": small.people, "people_large": big.people,
		"bulk_load_seconds_small": small.loaded.Seconds(), "bulk_load_seconds_large": big.loaded.Seconds(),
		"bulk_load_steps_large": big.steps})

	figures, err := scaleRates(e, tb, ctx, scaleEndpoints, [2]*scaleSide{small, big}, sizes(small, big), details)
	if err != nil {
		return nil, err
	}
	e.cfg.progressf("scale: the whole user list and the server's peak memory")
	stream, memory, err := e.scaleStream(ctx, small, big, details)
	if err != nil {
		return nil, err
	}
	e.cfg.progressf("scale: the sweep")
	sweep, err := e.scaleSweep(ctx, small, big, details)
	if err != nil {
		return nil, err
	}
	return append(figures, stream, memory, sweep), nil
}

func sizes(small, big *scaleSide) string {
	return fmt.Sprintf("%s / %s people", count(big.people), count(small.people))
}

// count writes n as 1k or 1M where it can.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// scaleEndpoints are the scale side's rates measured with wrk, each request drawn at random
// from a set that spreads over the table (people from a random sample of a thousand).
var scaleEndpoints = []scaleEndpoint[*scaleSide]{
	{"scale_apikey", "GET /api/me with a random person's API key/s", scaleClients, func(s *scaleSide) []scaleRequest {
		return perPerson(s, func(id int64) scaleRequest { return scaleRequest{"GET", "/api/me", scaleKey(id), ""} })
	}},
	{"scale_signin", "password sign-ins of random people/s", signInClients, func(s *scaleSide) []scaleRequest {
		out := make([]scaleRequest, len(s.names))
		for i, name := range s.names {
			out[i] = scaleRequest{"POST", "/api/auth/login", "", fmt.Sprintf(`{"username":%q,"password":%q}`, name, scalePassword)}
		}
		return out
	}},
	{"scale_users_page", "GET /api/users?limit=100 (the first page)/s", scaleClients, func(s *scaleSide) []scaleRequest {
		return []scaleRequest{{"GET", "/api/users?limit=100", s.admin.APIKey, ""}}
	}},
	{"scale_audit_actor", "GET /api/audit?actor=<a random person>/s", scaleClients, func(s *scaleSide) []scaleRequest {
		return perPerson(s, func(id int64) scaleRequest {
			return scaleRequest{"GET", fmt.Sprintf("/api/audit?actor=%d", id), s.admin.APIKey, ""}
		})
	}},
	{"scale_audit_event_prefix", "GET /api/audit?event=user.* or api_key.*/s", scaleClients, func(s *scaleSide) []scaleRequest {
		return []scaleRequest{{"GET", "/api/audit?event=user.*", s.admin.APIKey, ""},
			{"GET", "/api/audit?event=api_key.*", s.admin.APIKey, ""}}
	}},
}

func perPerson(s *scaleSide, f func(id int64) scaleRequest) []scaleRequest {
	out := make([]scaleRequest, len(s.ids))
	for i, id := range s.ids {
		out[i] = f(id)
	}
	return out
}

// scaleStream reads the whole user list from each side, back to back for a round (at least
// once), in alternating rounds: the rate is people listed per second. Before each list the
// server's peak resident memory is reset (/proc/<pid>/clear_refs), and read after it
// (VmHWM): the memory figure is the highest of each side's.
func (e *env) scaleStream(ctx context.Context, small, big *scaleSide, details func(map[string]any) map[string]any) (rate, memory Figure, err error) {
	var rates [2][]float64
	var peaks [2]float64
	var lists [2]int
	for i, s := range []*scaleSide{small, big} {
		n, err := countPeople(ctx, s)
		if err != nil {
			return rate, memory, err
		}
		lists[i] = n
	}
	round := func(i int, s *scaleSide) func() error {
		return func() error {
			start, n := time.Now(), 0
			for n == 0 || time.Since(start) < e.cfg.Round {
				if err := resetPeak(s.proc); err != nil {
					return err
				}
				if err := e.listAll(ctx, s, lists[i]); err != nil {
					return err
				}
				peak, err := peakRSS(s.proc)
				if err != nil {
					return err
				}
				peaks[i] = max(peaks[i], peak)
				n++
			}
			rates[i] = append(rates[i], float64(n*lists[i])/time.Since(start).Seconds())
			return nil
		}
	}
	if err := alternate(e.cfg.Rounds, round(0, small), round(1, big)); err != nil {
		return rate, memory, fmt.Errorf("scale: the whole user list: %w", err)
	}
	rate = newFigure("scale_users_stream", "GET /api/users, the whole list, people listed/s, "+sizes(small, big), "/s",
		median(rates[1]), median(rates[0]), scaleRateGoal, details(map[string]any{"rounds_small": rates[0], "rounds_large": rates[1],
			"users_listed_small": lists[0], "users_listed_large": lists[1]}))
	memory = newFigure("scale_users_stream_memory", "peak server memory (VmHWM) over the whole user list, "+sizes(small, big), "MB",
		peaks[1], peaks[0], scaleMemoryGoal, details(map[string]any{"see": rate.Key}))
	return rate, memory, nil
}

// countPeople is how many users GET /api/users lists on s.
func countPeople(ctx context.Context, s *scaleSide) (int, error) {
	var n int
	err := s.st.Pool().QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&n)
	return n, err
}

// listAll reads GET /api/users whole and checks that it is one array of want users: it counts
// the users' ids, which start every user and nothing else.
func (e *env) listAll(ctx context.Context, s *scaleSide, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.proc.URL+"/api/users", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.admin.APIKey)
	resp, err := e.client.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/users on %s: status %d", s.proc.name, resp.StatusCode)
	}
	n, first, last, err := countIDs(resp.Body)
	if err != nil {
		return fmt.Errorf("GET /api/users on %s: %w", s.proc.name, err)
	}
	if n != want || first != '[' || last != ']' {
		return fmt.Errorf("GET /api/users on %s: got %d users between %q and %q, want %d in an array", s.proc.name, n, first, last, want)
	}
	return nil
}

// countIDs counts `{"id":` in r and returns the first byte and the last but the newline.
func countIDs(r io.Reader) (n int, first, last byte, err error) {
	const marker = `{"id":`
	br := bufio.NewReaderSize(r, 256<<10)
	var carry []byte
	buf := make([]byte, 256<<10)
	for {
		k, rerr := br.Read(buf)
		if k > 0 {
			chunk := append(carry, buf[:k]...)
			if first == 0 {
				first = chunk[0]
			}
			n += bytes.Count(chunk, []byte(marker))
			// Keep the tail where a marker cut in two may begin: shorter than a marker, it
			// holds no whole one, so nothing is counted twice.
			keep := min(len(chunk), len(marker)-1)
			carry = append(carry[:0:0], chunk[len(chunk)-keep:]...)
			if t := bytes.TrimRight(chunk, "\n"); len(t) > 0 {
				last = t[len(t)-1]
			}
		}
		if rerr == io.EOF {
			return n, first, last, nil
		}
		if rerr != nil {
			return n, first, last, rerr
		}
	}
}

// resetPeak resets the process's peak resident memory to its current one.
func resetPeak(p *process) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}

// peakRSS is the process's peak resident memory since the last reset, in MB (VmHWM).
func peakRSS(p *process) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("%s: no VmHWM in /proc/%d/status", p.name, p.cmd.Process.Pid)
}

// scaleSweepRows is how many sessions, and as many API keys, each sweep round finds to delete.
const scaleSweepRows = 1000

// scaleSweep times the store's Sweep on each side, in alternating rounds (as many as the
// API-key figures': one sweep a round is short, and the machine's noise large), each after marking
// scaleSweepRows sessions expired and as many keys revoked (untimed): rows deleted per second.
func (e *env) scaleSweep(ctx context.Context, small, big *scaleSide, details func(map[string]any) map[string]any) (Figure, error) {
	var rates [2][]float64
	round := func(i int, s *scaleSide) func() error {
		return func() error {
			if err := s.expireSome(ctx, scaleSweepRows); err != nil {
				return err
			}
			start := time.Now()
			res, err := s.st.Sweep(ctx, time.Hour)
			took := time.Since(start)
			if err != nil {
				return err
			}
			if n := res.Sessions + res.APIKeys; n != 2*scaleSweepRows {
				return fmt.Errorf("sweep on %s deleted %d sessions and %d keys, want %d of each", s.name, res.Sessions, res.APIKeys, scaleSweepRows)
			}
			rates[i] = append(rates[i], float64(2*scaleSweepRows)/took.Seconds())
			return nil
		}
	}
	if err := alternate(e.cfg.KeyRounds, round(0, small), round(1, big)); err != nil {
		return Figure{}, fmt.Errorf("scale: the sweep: %w", err)
	}
	return newFigure("scale_sweep", "sweep, rows deleted/s, "+sizes(small, big), "/s", median(rates[1]), median(rates[0]),
		scaleRateGoal, details(map[string]any{"rounds_small": rates[0], "rounds_large": rates[1],
			"rows_a_round": fmt.Sprintf("%d expired sessions and %d revoked keys", scaleSweepRows, scaleSweepRows)})), nil
}
