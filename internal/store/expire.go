package store

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// ExpiryResult is what one round of ExpireAlerts did.
type ExpiryResult struct {
	Expired  int // occurrences resolved by expiry
	Resolved int // incidents resolved because their last firing alert expired
	Groups   int // groups visited
}

// ExpireAlerts resolves ("expiry") firing occurrences that their integration has not reported
// for its expire_after, at most batch of them a round: Alertmanager never sends a resolution for
// a silenced alert. Each group is handled under the lock its notifications take, its candidates
// checked again under it, so a notification that arrives meanwhile keeps its alerts alive; a
// round is safe on any number of replicas at once and after a failed one. An incident whose last
// firing alert expired is resolved ("alerts"), and so is an incident held open with nothing
// firing (its group's notifications left alerts out) whose group was not sent for its
// integration's expire_after. A real resolution arriving later corrects an expired occurrence
// (Ingest).
func (s *Store) ExpireAlerts(ctx context.Context, batch int) (ExpiryResult, error) {
	var res ExpiryResult
	type group struct {
		integrationID int64
		key           string
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT c.integration_id, c.group_key
		FROM (SELECT a.integration_id, o.group_key FROM incident_alerts o
			JOIN alerts a ON a.id = o.alert_id JOIN integrations g ON g.id = a.integration_id
			WHERE o.status = 'firing' AND o.last_seen_at < now() - g.expire_after
			ORDER BY o.last_seen_at LIMIT $1) c`, batch)
	if err != nil {
		return res, wrap(err, "find expired alerts")
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (group, error) {
		var g group
		return g, row.Scan(&g.integrationID, &g.key)
	})
	if err != nil {
		return res, wrap(err, "find expired alerts")
	}
	held, err := s.expireHeldIncidents(ctx, batch)
	res.Resolved += held
	if err != nil {
		return res, err
	}
	for _, g := range groups {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))`,
				groupLockKey(g.integrationID, g.key)); err != nil {
				return wrap(err, "lock the group")
			}
			return expireGroup(ctx, tx, g.integrationID, g.key, batch, &res)
		})
		if err != nil {
			return res, err
		}
		res.Groups++
	}
	return res, nil
}

// expireGroup resolves the group's expired occurrences, their alerts' rows where the expired
// occurrence is the current one, writes their events, and resolves what is left quiet.
func expireGroup(ctx context.Context, tx pgx.Tx, integrationID int64, groupKey string, batch int, res *ExpiryResult) error {
	rows, err := tx.Query(ctx, `UPDATE incident_alerts o SET status = 'resolved', ends_at = now(), resolution_source = 'expiry'
		FROM alerts a, integrations g
		WHERE o.id IN (SELECT o2.id FROM incident_alerts o2 JOIN alerts a2 ON a2.id = o2.alert_id
				WHERE a2.integration_id = $1 AND o2.group_key = $2 AND o2.status = 'firing'
				ORDER BY o2.last_seen_at LIMIT $3 FOR UPDATE OF o2)
			AND a.id = o.alert_id AND g.id = a.integration_id
			AND o.status = 'firing' AND o.last_seen_at < now() - g.expire_after
		RETURNING o.incident_id, o.alert_id`, integrationID, groupKey, batch)
	if err != nil {
		return wrap(err, "expire occurrences")
	}
	type expired struct {
		incidentID, alertID int64
	}
	var alertIDs []int64
	byIncident := map[int64][]int64{}
	var order []int64
	for rows.Next() {
		var e expired
		if err := rows.Scan(&e.incidentID, &e.alertID); err != nil {
			rows.Close()
			return wrap(err, "expire occurrences")
		}
		alertIDs = append(alertIDs, e.alertID)
		if _, ok := byIncident[e.incidentID]; !ok {
			order = append(order, e.incidentID)
		}
		byIncident[e.incidentID] = append(byIncident[e.incidentID], e.alertID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return wrap(err, "expire occurrences")
	}
	if len(alertIDs) == 0 {
		return nil
	}
	res.Expired += len(alertIDs)
	// The feed's row follows where the expired occurrence is the alert's current one.
	if _, err := tx.Exec(ctx, `UPDATE alerts a SET status = 'resolved', ends_at = o.ends_at, resolution_source = 'expiry'
		FROM incident_alerts o WHERE a.id = ANY($1) AND o.alert_id = a.id AND o.group_key = $2
			AND o.starts_at = a.starts_at AND o.resolution_source = 'expiry' AND a.status = 'firing'`, alertIDs, groupKey); err != nil {
		return wrap(err, "expire alerts")
	}
	for _, incidentID := range order {
		ids := byIncident[incidentID]
		if err := resolutionEvents(ctx, tx, incidentID, ids, "expired: not reported for its integration's expire_after",
			pluralExpired(len(ids))); err != nil {
			return err
		}
		resolved, err := resolveIfQuiet(ctx, tx, incidentID)
		if err != nil {
			return err
		}
		if resolved {
			res.Resolved++
		}
	}
	return nil
}

func pluralExpired(n int) string {
	if n == 1 {
		return "1 alert expired"
	}
	return strconv.Itoa(n) + " alerts expired"
}

// expireHeldIncidents resolves ("alerts") at most batch open incidents with nothing firing whose
// group's last notification was applied longer than their integration's expire_after ago:
// those a notification that left alerts out (max_alerts) held open, once Alertmanager no longer
// sends the group. Each is checked again under its group's lock, so a notification that
// arrives meanwhile keeps it.
func (s *Store) expireHeldIncidents(ctx context.Context, batch int) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.id, i.integration_id, i.group_key FROM incidents i
		JOIN integrations g ON g.id = i.integration_id
		WHERE i.resolved_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM incident_alerts o WHERE o.incident_id = i.id AND o.status = 'firing')
			AND NOT EXISTS (SELECT 1 FROM notification_digests d WHERE d.integration_id = i.integration_id
				AND d.group_key = i.group_key AND d.applied_at >= now() - g.expire_after)
		ORDER BY i.triggered_at, i.id LIMIT $1`, batch)
	if err != nil {
		return 0, wrap(err, "find incidents held open")
	}
	type held struct {
		id, integrationID int64
		key               string
	}
	incidents, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (held, error) {
		var h held
		return h, row.Scan(&h.id, &h.integrationID, &h.key)
	})
	if err != nil {
		return 0, wrap(err, "find incidents held open")
	}
	resolved := 0
	for _, h := range incidents {
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))`,
				groupLockKey(h.integrationID, h.key)); err != nil {
				return wrap(err, "lock the group")
			}
			tag, err := tx.Exec(ctx, `WITH r AS (
					UPDATE incidents i SET status = 'resolved', resolved_at = now(), resolution_source = 'alerts'
					FROM integrations g
					WHERE i.id = $1 AND g.id = i.integration_id AND i.resolved_at IS NULL
						AND NOT EXISTS (SELECT 1 FROM incident_alerts o WHERE o.incident_id = i.id AND o.status = 'firing')
						AND NOT EXISTS (SELECT 1 FROM notification_digests d WHERE d.integration_id = i.integration_id
							AND d.group_key = i.group_key AND d.applied_at >= now() - g.expire_after)
					RETURNING i.id
				)
				INSERT INTO incident_events (incident_id, type, detail)
				SELECT id, '`+EventResolved+`', 'its group was not sent for its integration''s expire_after' FROM r`, h.id)
			if err != nil {
				return wrap(err, "resolve an incident held open")
			}
			resolved += int(tag.RowsAffected())
			return nil
		})
		if err != nil {
			return resolved, err
		}
	}
	return resolved, nil
}
