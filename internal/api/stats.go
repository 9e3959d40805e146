package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The statistics (../shared/incident-contract.md): read from counters the database keeps, so
// each answer costs the same however many alerts and incidents are stored. Any signed-in
// person reads them.

const (
	defaultTopLimit = 10
	maxTopLimit     = 100
)

type alertStatsJSON struct {
	Total    int64 `json:"total"`
	Firing   int64 `json:"firing"`
	Resolved int64 `json:"resolved"`
}

// incidentStatsJSON's mean times are null until there is something to average: "no data",
// not zero.
type incidentStatsJSON struct {
	Total        int64    `json:"total"`
	Triggered    int64    `json:"triggered"`
	Acknowledged int64    `json:"acknowledged"`
	Resolved     int64    `json:"resolved"`
	MTTASeconds  *float64 `json:"mtta_seconds"`
	MTTRSeconds  *float64 `json:"mttr_seconds"`
}

type topAlertJSON struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

type hourJSON struct {
	Hour  int   `json:"hour"`
	Count int64 `json:"count"`
}

type dayJSON struct {
	Day     int    `json:"day"`
	DayName string `json:"day_name"`
	Count   int64  `json:"count"`
}

func (s *server) handleAlertStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := s.store.AlertStats(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, alertStatsJSON(a))
	})
}

func (s *server) handleIncidentStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := s.store.IncidentStats(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, incidentStatsJSON{Total: in.Total, Triggered: in.Triggered,
			Acknowledged: in.Acknowledged, Resolved: in.Resolved, MTTASeconds: seconds(in.MTTA), MTTRSeconds: seconds(in.MTTR)})
	})
}

func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}

// topLimit reads the top list's limit: absent, defaultTopLimit; else a whole number from 1 to
// maxTopLimit, anything else refused.
func topLimit(r *http.Request) (int, error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return defaultTopLimit, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > maxTopLimit {
		return 0, errBadRequest("invalid_query", "limit must be a whole number from 1 to 100 (absent: 10).")
	}
	return n, nil
}

func (s *server) handleTopAlerts() http.Handler {
	return countsHandler(s, func(r *http.Request) ([]store.Count, error) {
		limit, err := topLimit(r)
		if err != nil {
			return nil, err
		}
		return s.store.TopAlerts(r.Context(), limit)
	}, func(c store.Count) topAlertJSON { return topAlertJSON{Name: c.Key, Count: c.Count} })
}

func (s *server) handleAlertsByHour() http.Handler {
	return countsHandler(s, func(r *http.Request) ([]store.Count, error) { return s.store.AlertsByHour(r.Context()) },
		func(c store.Count) hourJSON { return hourJSON{Hour: number(c.Key), Count: c.Count} })
}

func (s *server) handleAlertsByDay() http.Handler {
	return countsHandler(s, func(r *http.Request) ([]store.Count, error) { return s.store.AlertsByDay(r.Context()) },
		func(c store.Count) dayJSON {
			day := number(c.Key)
			return dayJSON{Day: day, DayName: time.Weekday(day % 7).String(), Count: c.Count}
		})
}

// countsHandler answers the list of counts read answers, each as conv writes it ([] for none).
func countsHandler[T any](s *server, read func(r *http.Request) ([]store.Count, error), conv func(store.Count) T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counts, err := read(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out := make([]T, len(counts))
		for i, c := range counts {
			out[i] = conv(c)
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// number reads a key the store writes as a small number (an hour, a weekday).
func number(key string) int {
	n, _ := strconv.Atoi(key)
	return n
}
