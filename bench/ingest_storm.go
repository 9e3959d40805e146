package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// stormSamples are one side's measurements of the storm, a round each.
type stormSamples struct {
	ms     []float64 // the notification's time, request to answer
	peakMB []float64 // the process's peak resident memory over it (VmHWM)
	readMS []float64 // the server's: GET /api/incidents/{id} of the storm's incident
}

// stormBodies builds each round's storm once and hands it to both sides: a new group of
// Config.IngestStorm new alerts (its label group makes every fingerprint new).
type stormBodies struct {
	alerts int
	base   time.Time
	built  map[int][]byte
	uses   map[int]int
}

func (s *stormBodies) get(round int) ([]byte, error) {
	b, ok := s.built[round]
	if !ok {
		var err error
		b, err = newGroup("BenchStorm", fmt.Sprintf("storm-%02d", round), s.alerts).body(s.base, false)
		if err != nil {
			return nil, err
		}
		s.built[round] = b
	}
	if s.uses[round]++; s.uses[round] == 2 {
		delete(s.built, round) // both sides have it: let the collector have it too
	}
	return b, nil
}

// storm measures the storm: Config.Rounds rounds a side after a warm-up, alternating, each
// side sent the same notification of a new group a round. Before each, the process's peak
// memory is reset (/proc/<pid>/clear_refs), and read after it. After the server's, its
// incident is read with a person's API key.
func (in *ingestRun) storm(ctx context.Context) ([]Figure, error) {
	n := in.e.cfg.IngestStorm
	bodies := &stormBodies{alerts: n, base: in.base, built: map[int][]byte{}, uses: map[int]int{}}
	var server, floor stormSamples
	rounds := map[string]int{}
	run := func(p *process, into *stormSamples) func() error {
		return func() error {
			i := rounds[p.name]
			rounds[p.name]++
			body, err := bodies.get(i)
			if err != nil {
				return err
			}
			if err := resetPeak(p); err != nil {
				return err
			}
			start := time.Now()
			ans, err := send(ctx, in.hc, p, in.key, body, n)
			took := time.Since(start)
			if err != nil {
				return err
			}
			peak, err := peakRSS(p)
			if err != nil {
				return err
			}
			var read time.Duration
			if p == in.e.server {
				if read, err = in.readIncident(ctx, ans.IncidentID, n); err != nil {
					return err
				}
			}
			if into != nil {
				into.ms = append(into.ms, ms(took))
				into.peakMB = append(into.peakMB, peak)
				if p == in.e.server {
					into.readMS = append(into.readMS, ms(read))
				}
			}
			return nil
		}
	}
	if err := in.e.warmUp(run(in.e.server, nil), run(in.e.floor, nil)); err != nil {
		return nil, err
	}
	if err := alternate(in.e.cfg.Rounds, run(in.e.server, &server), run(in.e.floor, &floor)); err != nil {
		return nil, err
	}
	details := map[string]any{"alerts": n, "rounds": in.e.cfg.Rounds, "body_bytes_approx": approxStormBytes(in, n),
		"rounds_ms_server": server.ms, "rounds_ms_floor": floor.ms, "median_ms_server": median(server.ms), "median_ms_floor": median(floor.ms)}
	storm := newFigure("ingest_storm", fmt.Sprintf("one notification of %s alerts in one new group, ms, server / floor", count(n)), "ms",
		mean(server.ms), mean(floor.ms), ingestStormGoal, details)
	memory := newFigure("ingest_storm_memory", fmt.Sprintf("peak process memory (VmHWM) over a notification of %s alerts, MB, server / floor", count(n)), "MB",
		slices.Max(server.peakMB), slices.Max(floor.peakMB), Goal{},
		map[string]any{"see": storm.Key, "rounds_mb_server": server.peakMB, "rounds_mb_floor": floor.peakMB,
			"value": "the highest of the rounds' peaks, each read after the peak was reset to the resident memory before the notification"})
	read := newFigure("ingest_storm_incident", fmt.Sprintf("GET /api/incidents/{id} of the storm's incident (%s alerts), ms / the client's 10 s timeout", count(n)), "ms",
		slices.Max(server.readMS), ms(clientTimeout), ingestReadGoal,
		map[string]any{"see": storm.Key, "rounds_ms": server.readMS, "value": "the slowest of the rounds' reads, each right after its storm",
			"goal": "a tenth of terdut-tui's timeout: well inside it"})
	return []Figure{storm, memory, read}, nil
}

// readIncident reads GET /api/incidents/{id} with a person's API key, checks that it holds the
// storm (alert_count, and the first 1,000 alerts inline), and returns how long it took.
func (in *ingestRun) readIncident(ctx context.Context, id int64, alerts int) (time.Duration, error) {
	if id == 0 {
		return 0, errNoIncident
	}
	start := time.Now()
	status, b, err := call(ctx, in.hc, http.MethodGet, fmt.Sprintf("%s/api/incidents/%d", in.e.server.URL, id), in.reader, nil)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	var got struct {
		AlertCount int               `json:"alert_count"`
		Alerts     []json.RawMessage `json:"alerts"`
	}
	if err := json.Unmarshal(b, &got); status != http.StatusOK || err != nil || got.AlertCount != alerts || len(got.Alerts) != min(alerts, 1000) {
		return 0, fmt.Errorf("GET /api/incidents/%d: got %d with alert_count %d and %d alerts inline, want 200, %d and %d",
			id, status, got.AlertCount, len(got.Alerts), alerts, min(alerts, 1000))
	}
	return took, nil
}

// approxStormBytes is the size of a storm's body, for the details.
func approxStormBytes(in *ingestRun, n int) int {
	b, err := newGroup("BenchStorm", "size", n).body(in.base, false)
	if err != nil {
		return 0
	}
	return len(b)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
