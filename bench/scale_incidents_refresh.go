package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5"
)

// The webhook's refresh of a group: Alertmanager sends a group's notification again at every
// group_interval while something in it changed, and every repeat_interval regardless. Each
// notification here re-sends the group of an open incident whole (every firing alert as stored:
// fingerprint, labels, startsAt), with one alert's `value` annotation changed, as a templated
// annotation ({{ $value }}) changes between two evaluations. So it is never the group's last
// notification again (the digest's fast path for replays within 15 s cannot take it): each one
// takes the ingest's transaction (the group's lock, the upsert that writes the changed alert,
// the occurrences' lookup, the open incident locked, the delivery recorded), and re-stamps the
// occurrences not reported for 15 s. Both sides hold the same loadOpen open incidents, of the
// same sizes, each sent by one of refreshClients clients in turn.

// refreshClients is how many notifications are in flight at once: the ingest side's (groupRound).
const refreshClients = ingestClients

// refreshGroup is one open incident's group and its next notification.
type refreshGroup struct {
	body amBody
	sent int
}

// refreshGroups reads the open incidents' groups: each one's firing alerts, as stored.
func (db *incidentDB) refreshGroups(ctx context.Context) ([]*refreshGroup, error) {
	rows, err := db.st.Pool().Query(ctx, `SELECT i.id, i.group_key, i.group_labels, a.fingerprint, a.labels, a.annotations,
			o.starts_at, a.generator_url
		FROM incidents i JOIN incident_alerts o ON o.incident_id = i.id AND o.status = 'firing'
			JOIN alerts a ON a.id = o.alert_id
		WHERE i.resolved_at IS NULL ORDER BY i.id, a.fingerprint`)
	if err != nil {
		return nil, err
	}
	var groups []*refreshGroup
	var last int64
	var id int64
	var key string
	var groupLabels map[string]string
	var a amAlert
	if _, err := pgx.ForEachRow(rows, []any{&id, &key, &groupLabels, &a.Fingerprint, &a.Labels, &a.Annotations, &a.StartsAt,
		&a.GeneratorURL}, func() error {
		if id != last {
			last = id
			groups = append(groups, &refreshGroup{body: amBody{Receiver: "terdut", Status: "firing", GroupLabels: groupLabels,
				CommonAnnotations: map[string]string{}, ExternalURL: "http://alertmanager.monitoring.svc:9093", Version: "4",
				GroupKey: key}})
		}
		a.Status, a.StartsAt = "firing", a.StartsAt.UTC()
		b := &groups[len(groups)-1].body
		b.Alerts = append(b.Alerts, a)
		a = amAlert{}
		return nil
	}); err != nil {
		return nil, err
	}
	for _, g := range groups {
		g.body.CommonLabels = commonLabels(g.body.Alerts)
	}
	if len(groups) != loadOpen {
		return nil, fmt.Errorf("%s: %d open incidents with firing alerts, want %d", db.name, len(groups), loadOpen)
	}
	return groups, nil
}

// commonLabels are the labels every alert has with the same value, as Alertmanager computes them.
func commonLabels(alerts []amAlert) map[string]string {
	common := maps.Clone(alerts[0].Labels)
	for _, a := range alerts[1:] {
		maps.DeleteFunc(common, func(k, v string) bool { return a.Labels[k] != v })
	}
	return common
}

// next is the group's next notification: one alert's value annotation, in turn, set to a
// value it never had.
func (g *refreshGroup) next() ([]byte, error) {
	g.sent++
	g.body.Alerts[g.sent%len(g.body.Alerts)].Annotations["value"] = fmt.Sprintf("%d.25", g.sent)
	return json.Marshal(g.body)
}

// scaleRefresh measures the webhook's refresh on both sides in alternating rounds, after a
// warm-up round each, then checks that the refreshes changed no incident, occurrence or
// timeline, and were all applied (each group sent has its digest stored).
func (e *env) scaleRefresh(ctx context.Context, sides [2]*incidentSide, sizes string, details func(map[string]any) map[string]any) (Figure, error) {
	hc := newIngestClient()
	var before [2]int
	for i, s := range sides {
		if err := s.st.Pool().QueryRow(ctx, `SELECT count(*) FROM incident_events`).Scan(&before[i]); err != nil {
			return Figure{}, err
		}
	}
	rates := [2]*side{{}, {}}
	run := func(i int, into *side) func() error {
		s := sides[i]
		return func() error {
			r, err := e.groupRound(ctx, s.proc, len(s.groups), func(ctx context.Context, g int) (int, error) {
				body, err := s.groups[g].next()
				if err != nil {
					return 0, err
				}
				_, err = send(ctx, hc, s.proc, s.key, body, len(s.groups[g].body.Alerts))
				return 1, err
			})
			if err == nil && into != nil {
				into.add(r)
			}
			return err
		}
	}
	if err := e.warmUp(run(0, nil), run(1, nil)); err != nil {
		return Figure{}, fmt.Errorf("scale: the webhook's refresh: %w", err)
	}
	if err := alternate(e.cfg.KeyRounds, run(0, rates[0]), run(1, rates[1])); err != nil {
		return Figure{}, fmt.Errorf("scale: the webhook's refresh: %w", err)
	}
	for i, s := range sides {
		// Every group sent at least once has its digest: each client sends its groups in turn for
		// as long as a round lasts, so a short round on a busy machine may not reach them all.
		var occurrences, open, events, digests int
		if err := s.st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM incident_alerts),
			(SELECT count(*) FROM incidents WHERE resolved_at IS NULL), (SELECT count(*) FROM incident_events),
			(SELECT count(*) FROM notification_digests)`).Scan(&occurrences, &open, &events, &digests); err != nil {
			return Figure{}, err
		}
		sent := 0
		for _, g := range s.groups {
			if g.sent > 0 {
				sent++
			}
		}
		if occurrences != s.occurrences || open != loadOpen || events != before[i] || digests != sent || sent == 0 {
			return Figure{}, fmt.Errorf("scale: after the refreshes, %s holds %d occurrences, %d open incidents, %d events, %d groups' digests; want %d, %d, %d, %d (the groups sent)",
				s.name, occurrences, open, events, digests, s.occurrences, loadOpen, before[i], sent)
		}
	}
	f := newFigure("scale_webhook_refresh", "POST /api/webhooks/alertmanager, an open incident's group again, one annotation changed/s, "+sizes, "/s",
		median(rates[1].rates), median(rates[0].rates), scaleRateGoal,
		details(map[string]any{"rounds_small": rates[0].rates, "rounds_large": rates[1].rates, "clients": refreshClients,
			"round": e.cfg.Round.String(), "groups": loadOpen,
			"cpu_us_per_notification_rounds_small": rates[0].cpuPerOps, "cpu_us_per_notification_rounds_large": rates[1].cpuPerOps,
			"process_cpu_us_per_notification_small": rates[0].selfCPUPerOp(), "process_cpu_us_per_notification_large": rates[1].selfCPUPerOp(),
			"postgres_cpu_us_per_notification_small": rates[0].serverCPUPerOp(), "postgres_cpu_us_per_notification_large": rates[1].serverCPUPerOp(),
			"load": "a Go loop in the bench's process, client c sending groups c, c+4, ... in turn, keep-alive connections to 127.0.0.1"}))
	f.CPURatio = mean(rates[0].cpuPerOps) / mean(rates[1].cpuPerOps)
	return f, nil
}
