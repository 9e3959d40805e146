package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
)

// expiryBatch is how many expired alerts one round resolves at most; a tick runs rounds until
// one finds fewer, at most expiryRoundsPerTick of them.
const (
	expiryBatch         = 500
	expiryRoundsPerTick = 20
)

// startExpiry resolves, every interval, the firing alerts their integration stopped reporting
// for its expire_after (store.ExpireAlerts): Alertmanager never sends a resolution for a
// silenced alert. Every replica runs it; rounds that overlap wait for each other group by
// group and find nothing left. It counts rounds and expired alerts in reg. The function it
// returns stops it and waits for a round in progress.
func startExpiry(ctx context.Context, st *store.Store, interval time.Duration, reg prometheus.Registerer, log *slog.Logger) (stop func()) {
	rounds := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "terdut_alert_expiry_rounds_total",
		Help: "Rounds of the alert expiry, by outcome."}, []string{"outcome"})
	expired := prometheus.NewCounter(prometheus.CounterOpts{Name: "terdut_alerts_expired_total",
		Help: "Firing alerts resolved by expiry (not reported for their integration's expire_after)."})
	for _, o := range []string{"ok", "error"} {
		rounds.WithLabelValues(o)
	}
	reg.MustRegister(rounds, expired)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			for range expiryRoundsPerTick {
				rctx, rcancel := context.WithTimeout(ctx, housekeepingTimeout)
				res, err := st.ExpireAlerts(rctx, expiryBatch)
				rcancel()
				if err != nil {
					if ctx.Err() == nil {
						rounds.WithLabelValues("error").Inc()
						log.Warn("alert expiry failed; the next round tries again", "err", err)
					}
					break
				}
				rounds.WithLabelValues("ok").Inc()
				expired.Add(float64(res.Expired))
				if res.Expired > 0 {
					log.Info("alerts expired: not reported for their integration's expire_after", "alerts", res.Expired,
						"incidents_resolved", res.Resolved)
				}
				if res.Expired < expiryBatch {
					break
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
