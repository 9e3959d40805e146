package store

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionResult counts what one round of Retain deleted, by kind.
type RetentionResult struct {
	Incidents   int64 // resolved incidents
	Events      int64 // their timeline events
	Occurrences int64 // their occurrences
	Alerts      int64 // alerts with no occurrence left
	Days        int64 // days of the on-call schedule
	// More says the round stopped at a bound: another may find more to delete.
	More bool
}

// occurrencesPerIncident bounds a round's occurrences: at most this many per incident of its
// batch, unless its first incident alone holds more.
const occurrencesPerIncident = 10

// retainIncidentsSQL locks a batch of the resolved incidents resolved before now() - $1, none
// of whose occurrences still fires (a manual resolution leaves them firing: deleting the
// incident would open a new one for them at their next report): at most batch incidents,
// oldest resolution first, holding at most $2 occurrences (their alert_count), unless the
// first alone holds more. Replicas skip each other's batches, and incidents a person's action
// or note holds. The batch is written into the statement, so that its generic plan, too,
// reads the index of resolutions for that many (as a parameter, the planner guesses a tenth
// of the table and scans it); the firing occurrences are looked up per incident. It answers
// the incidents to delete, and how many it chose from (a full batch: there may be more).
func retainIncidentsSQL(batch int) string {
	return `WITH candidates AS (
		SELECT id, resolved_at, alert_count FROM incidents i
		WHERE resolved_at < now() - $1::interval
			AND (SELECT o.id FROM incident_alerts o WHERE o.incident_id = i.id AND o.status = 'firing' LIMIT 1) IS NULL
		ORDER BY resolved_at, id LIMIT ` + strconv.Itoa(batch) + ` FOR UPDATE SKIP LOCKED
	)
	SELECT ARRAY(SELECT id FROM (SELECT id, alert_count,
			pg_catalog.sum(alert_count) OVER (ORDER BY resolved_at, id) AS running FROM candidates) c
			WHERE running <= $2 OR running = alert_count),
		(SELECT count(*) FROM candidates)`
}

// deleteIncidentsSQL deletes the incidents $1, locked by retainIncidentsSQL, with their events
// and occurrences, and answers how many of each went. It runs after the locks are held, so it
// sees every event committed before (a note written while the incidents were being chosen);
// one written since waits for this transaction and finds its incident gone.
const deleteIncidentsSQL = `WITH events AS (
		DELETE FROM incident_events WHERE incident_id = ANY($1) RETURNING 1
	), occurrences AS (
		DELETE FROM incident_alerts WHERE incident_id = ANY($1) RETURNING 1
	), gone AS (
		DELETE FROM incidents WHERE id = ANY($1) RETURNING 1
	)
	SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM occurrences), (SELECT count(*) FROM events)`

// retainAlertsSQL locks a batch of the alerts that may have no occurrence left: linked to
// no incident (the last one they were in was deleted, or they never fired) and not reported
// since now() - $1. Rows a notification holds are skipped.
func retainAlertsSQL(batch int) string {
	return `SELECT id FROM alerts WHERE incident_id IS NULL AND received_at < now() - $1::interval
		LIMIT ` + strconv.Itoa(batch) + ` FOR UPDATE SKIP LOCKED`
}

// deleteAlertsSQL deletes those of the locked alerts ($1) with no occurrence. It runs after the
// locks are held, so it sees every occurrence committed before: one added since is refused
// by the locks until this transaction ends.
const deleteAlertsSQL = `DELETE FROM alerts a WHERE a.id = ANY($1)
	AND NOT EXISTS (SELECT 1 FROM incident_alerts o WHERE o.alert_id = a.id)`

// Retain runs one round of retention: it deletes the incidents resolved longer than olderThan
// ago (archived or not), their events and occurrences, at most batch incidents holding at most
// 10 × batch occurrences (an incident alone may hold more); then at most batch alerts that
// have no occurrence left and were last reported longer than olderThan ago. Open incidents,
// and resolved ones an alert still fires in, are kept. Replicas may run rounds at once: each
// skips what another holds, so none waits, fails or counts twice. The statistics follow (the
// counters' triggers). ErrUnavailable for what is worth retrying.
func (s *Store) Retain(ctx context.Context, olderThan time.Duration, batch int) (RetentionResult, error) {
	var res RetentionResult
	var candidates int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var doomed []int64
		err := tx.QueryRow(ctx, retainIncidentsSQL(batch), olderThan, occurrencesPerIncident*batch).Scan(&doomed, &candidates)
		if err != nil || len(doomed) == 0 {
			return err
		}
		return tx.QueryRow(ctx, deleteIncidentsSQL, doomed).Scan(&res.Incidents, &res.Occurrences, &res.Events)
	})
	if err != nil {
		return RetentionResult{}, wrap(err, "delete old incidents")
	}
	res.More = candidates == int64(batch) || res.Incidents < candidates
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, retainAlertsSQL(batch), olderThan)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		res.More = res.More || len(ids) == batch
		tag, err := tx.Exec(ctx, deleteAlertsSQL, ids)
		res.Alerts = tag.RowsAffected()
		return err
	})
	if err != nil {
		res.Alerts = 0
		return res, wrap(err, "delete old alerts")
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, retainDaysSQL, olderThan, batch)
		res.Days = tag.RowsAffected()
		return err
	})
	if err != nil {
		res.Days = 0
		return res, wrap(err, "delete old schedule days")
	}
	res.More = res.More || res.Days == int64(batch)
	return res, nil
}

// retainDaysSQL deletes at most $2 days of the schedule older than now() - $1 (UTC days), the
// oldest first, skipping those another replica's round holds.
const retainDaysSQL = `DELETE FROM schedule WHERE id = ANY(ARRAY(
	SELECT id FROM schedule WHERE date < ((now() - $1::interval) AT TIME ZONE 'UTC')::date
	ORDER BY date LIMIT $2 FOR UPDATE SKIP LOCKED))`
