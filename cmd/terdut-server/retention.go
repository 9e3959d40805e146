package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
)

// retentionSchedule is the retention job's pace: a tick every interval (the first at start),
// each running rounds of batch incidents and alerts until one finds no more; after a failed
// round, the next tick comes after retry.
type retentionSchedule struct {
	interval, retry time.Duration
	batch           int
}

// dailyRetention is the server's: a tick a day, rounds of 1,000, a failed round tried again
// after 5 minutes rather than a day later.
var dailyRetention = retentionSchedule{interval: 24 * time.Hour, retry: 5 * time.Minute, batch: 1000}

// retentionJob deletes what is older than keep (store.Retain), counting it in its metrics.
type retentionJob struct {
	st      *store.Store
	keep    time.Duration
	sched   retentionSchedule
	log     *slog.Logger
	rounds  *prometheus.CounterVec
	deleted *prometheus.CounterVec
}

// startRetention deletes, once at start and then on sched, the resolved incidents, their
// events and occurrences, and the alerts left without any, older than keep (--retention; 0
// keeps everything and starts nothing). Every replica runs it: rounds at once take disjoint
// batches (store.Retain). It counts rounds and deletions in reg. The function it returns stops
// it and waits for a round in progress.
func startRetention(ctx context.Context, st *store.Store, keep time.Duration, sched retentionSchedule, reg prometheus.Registerer,
	log *slog.Logger) (stop func()) {
	j := &retentionJob{st: st, keep: keep, sched: sched, log: log,
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_retention_rounds_total",
			Help: "Rounds of the retention of incidents and alerts, by outcome."}, []string{"outcome"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_retention_deleted_total",
			Help: "Rows the retention deleted, by kind."}, []string{"kind"})}
	for _, o := range []string{"ok", "error"} {
		j.rounds.WithLabelValues(o)
	}
	for _, k := range []string{"incidents", "events", "occurrences", "alerts", "days"} {
		j.deleted.WithLabelValues(k)
	}
	reg.MustRegister(j.rounds, j.deleted)
	if keep == 0 {
		log.Info("retention is off (--retention 0): resolved incidents and alerts are kept for ever")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			wait := sched.interval
			if !j.tick(ctx) {
				wait = sched.retry
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// tick runs rounds until one finds nothing more, and reports whether none failed.
func (j *retentionJob) tick(ctx context.Context) bool {
	var total store.RetentionResult
	defer func() {
		if total != (store.RetentionResult{}) {
			j.log.Info("retention: deleted what is older than --retention", "retention", j.keep.String(),
				"incidents", total.Incidents, "events", total.Events, "occurrences", total.Occurrences, "alerts", total.Alerts, "days", total.Days)
		}
	}()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, housekeepingTimeout)
		res, err := j.st.Retain(rctx, j.keep, j.sched.batch)
		cancel()
		for kind, n := range map[string]int64{"incidents": res.Incidents, "events": res.Events,
			"occurrences": res.Occurrences, "alerts": res.Alerts, "days": res.Days} {
			j.deleted.WithLabelValues(kind).Add(float64(n))
		}
		total.Incidents += res.Incidents
		total.Events += res.Events
		total.Occurrences += res.Occurrences
		total.Alerts += res.Alerts
		total.Days += res.Days
		if err != nil {
			if ctx.Err() != nil {
				return true
			}
			j.rounds.WithLabelValues("error").Inc()
			j.log.Warn("retention: a round failed; it tries again shortly", "err", err, "retry_in", j.sched.retry.String())
			return false
		}
		j.rounds.WithLabelValues("ok").Inc()
		if !res.More {
			break
		}
	}
	return true
}
