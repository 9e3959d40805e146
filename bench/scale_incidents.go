package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The scale side's incident half (issue 39): the incident domain's hot paths over a database of
// scaleSmallOccurrences alert occurrences (a tenth as many incidents) and one of
// Config.ScaleOccurrences (a million in `make bench`), both bulk-loaded to the same shape
// (scale_incidents_sql.go) and checked (scale_incidents_check.go), each served by a
// terdut-server process of its own with its defaults, side by side in alternating rounds. Every
// figure is the large side's over the small side's: a rate that does not drop with the size of
// the history is >= 0.9, and the server's peak memory over the whole half stays within 1.2 times.

// scaleSmallOccurrences is the number of occurrences of the baseline side.
const scaleSmallOccurrences = 1000

// incidentSide is one database of the incident half, the server over it, and what is sent to it.
type incidentSide struct {
	*incidentDB
	proc      *process
	timelines []int64         // a random sample of incidents whose timeline has the typical length
	groups    []*refreshGroup // the open incidents' groups, for the webhook
}

func (s *incidentSide) server() *process { return s.proc }

// incidentGET is an endpoint's requests: GET path with an on-call person's API key.
func incidentGET(path string) func(s *incidentSide) []scaleRequest {
	return func(s *incidentSide) []scaleRequest { return []scaleRequest{{"GET", path, s.reader.APIKey, ""}} }
}

// incidentEndpoints are the incident half's rates measured with wrk: one line an endpoint. Before
// measuring, the run checks that both sides answer each one's first request alike (a list, the
// same number of items), so that a figure compares like work.
var incidentEndpoints = []scaleEndpoint[*incidentSide]{
	{"scale_incidents_queue", "GET /api/incidents (the queue: open, not snoozed)/s", scaleClients, incidentGET("/api/incidents")},
	{"scale_alerts_feed", "GET /api/alerts?limit=500/s", scaleClients, incidentGET("/api/alerts?limit=500")},
	{"scale_incident_timeline", "GET /api/incidents/{id}/timeline of a random incident with a typical timeline/s", scaleClients,
		func(s *incidentSide) []scaleRequest {
			out := make([]scaleRequest, len(s.timelines))
			for i, id := range s.timelines {
				out[i] = scaleRequest{"GET", fmt.Sprintf("/api/incidents/%d/timeline", id), s.reader.APIKey, ""}
			}
			return out
		}},
	{"scale_stats_alerts", "GET /api/stats/alerts/s", scaleClients, incidentGET("/api/stats/alerts")},
	{"scale_stats_incidents", "GET /api/stats/incidents/s", scaleClients, incidentGET("/api/stats/incidents")},
	{"scale_stats_top", "GET /api/stats/alerts/top?limit=10/s", scaleClients, incidentGET("/api/stats/alerts/top?limit=10")},
	{"scale_stats_by_hour", "GET /api/stats/alerts/by-hour/s", scaleClients, incidentGET("/api/stats/alerts/by-hour")},
	{"scale_stats_by_day", "GET /api/stats/alerts/by-day/s", scaleClients, incidentGET("/api/stats/alerts/by-day")},
}

// scaleIncidents measures the incident half's figures (see the comment at the top of this file).
func (e *env) scaleIncidents(tb testing.TB, ctx context.Context) ([]Figure, error) {
	tb.Helper()
	large, serverBin, err := e.scaleSetup(tb, e.cfg.ScaleOccurrences)
	if err != nil {
		return nil, err
	}
	var sides [2]*incidentSide
	for i, n := range []int{scaleSmallOccurrences, large} {
		e.cfg.progressf("scale: loading %d alert occurrences in %d incidents, their alerts and timelines", n, n/10)
		db, err := newIncidentDB(tb, ctx, e.cluster, fmt.Sprintf("incidents_%d", n), n)
		if err != nil {
			return nil, err
		}
		e.cfg.progressf("scale: %d occurrences loaded in %s (%s), checked in %s", n, db.loaded.Round(100*time.Millisecond),
			db.steps, db.checked.Round(100*time.Millisecond))
		// The server's defaults, its alert expiry included: the load's firing alerts were
		// reported moments ago, and nothing expires during the run.
		proc := startProcess(tb, fmt.Sprintf("terdut-server over %s occurrences", count(n)), serverBin, true,
			[]string{"TERDUT_DATABASE_URL=" + db.url})
		sides[i] = &incidentSide{incidentDB: db, proc: proc}
	}
	small, big := sides[0], sides[1]
	typical, err := small.typicalTimeline(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sides {
		if s.timelines, err = s.sampleTimelines(ctx, typical); err != nil {
			return nil, err
		}
		if s.groups, err = s.refreshGroups(ctx); err != nil {
			return nil, err
		}
	}
	if err := e.sameAnswers(ctx, sides); err != nil {
		return nil, err
	}
	sizes := fmt.Sprintf("%s / %s occurrences", count(big.occurrences), count(small.occurrences))
	details := withDetails(map[string]any{"occurrences_small": small.occurrences, "occurrences_large": big.occurrences,
		"incidents_small": small.occurrences / 10, "incidents_large": big.occurrences / 10, "open_incidents": loadOpen,
		"timeline_events": typical, "bulk_load_seconds_small": small.loaded.Seconds(), "bulk_load_seconds_large": big.loaded.Seconds(),
		"bulk_load_steps_large": big.steps, "invariants_checked_seconds_large": big.checked.Seconds()})

	// The memory figure is the peak over everything the half sends.
	for _, s := range sides {
		if err := resetPeak(s.proc); err != nil {
			return nil, err
		}
	}
	figures, err := scaleRates(e, tb, ctx, incidentEndpoints, sides, sizes, details)
	if err != nil {
		return nil, err
	}
	e.cfg.progressf("scale: the webhook's refresh of open incidents' groups")
	refresh, err := e.scaleRefresh(ctx, sides, sizes, details)
	if err != nil {
		return nil, err
	}
	var peaks [2]float64
	for i, s := range sides {
		if peaks[i], err = peakRSS(s.proc); err != nil {
			return nil, err
		}
	}
	memory := newFigure("scale_incidents_memory", "peak server memory (VmHWM) over the incident half's requests, "+sizes, "MB",
		peaks[1], peaks[0], scaleMemoryGoal, details(map[string]any{"value": "VmHWM read after the last round, reset before the first warm-up"}))
	return append(figures, refresh, memory), nil
}

// sameAnswers sends each endpoint's first request to both sides and checks that both answer 200
// and, where the answer is a list, the same number of items.
func (e *env) sameAnswers(ctx context.Context, sides [2]*incidentSide) error {
	hc := newIngestClient()
	for _, ep := range incidentEndpoints {
		var items [2]int
		for i, s := range sides {
			reqs := ep.requests(s)
			if len(reqs) == 0 {
				return fmt.Errorf("scale: %s: no request to send to %s", ep.name, s.proc.name)
			}
			r := reqs[0]
			status, b, err := call(ctx, hc, r.method, s.proc.URL+r.path, r.bearer, nil)
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("scale: %s %s on %s: got %d %s, want 200", r.method, r.path, s.proc.name, status, b)
			}
			var list []json.RawMessage
			if json.Unmarshal(b, &list) == nil {
				items[i] = len(list)
			}
		}
		if items[0] != items[1] {
			return fmt.Errorf("scale: %s: the sides answer %d and %d items: the figure would compare unlike work", ep.name, items[0], items[1])
		}
	}
	return nil
}

// typicalTimeline is the median length of the side's timelines.
func (db *incidentDB) typicalTimeline(ctx context.Context) (int, error) {
	var n int
	err := db.st.Pool().QueryRow(ctx, `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY n)
		FROM (SELECT count(*) AS n FROM incident_events GROUP BY incident_id) x`).Scan(&n)
	return n, err
}

// sampleTimelines returns up to a thousand incidents whose timeline has events events, at random.
func (db *incidentDB) sampleTimelines(ctx context.Context, events int) ([]int64, error) {
	rows, err := db.st.Pool().Query(ctx, `SELECT incident_id FROM incident_events GROUP BY incident_id
		HAVING count(*) = $1 ORDER BY random() LIMIT 1000`, events)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err == nil && len(ids) == 0 {
		err = fmt.Errorf("%s: no incident has a timeline of %d events", db.name, events)
	}
	return ids, err
}
