package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Worker is the person who works an incident, as its timeline names them.
type Worker struct {
	ID       int64
	Username string
}

// act runs one action on incident id in a transaction: it locks the row, hands fn the
// incident's state, and returns the incident as fn left it. ErrNotFound if there is none.
func (s *Store) act(ctx context.Context, id int64, fn func(tx pgx.Tx, in Incident) error) (Incident, error) {
	var out Incident
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM incidents WHERE id = $1 FOR NO KEY UPDATE`, id); err != nil {
			return wrap(err, "lock incident")
		}
		in, err := incidentByID(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := fn(tx, in); err != nil {
			return err
		}
		out, err = incidentByID(ctx, tx, id)
		return err
	})
	return out, err
}

// exec runs one statement of an action.
func exec(ctx context.Context, tx pgx.Tx, what, sql string, args ...any) error {
	_, err := tx.Exec(ctx, sql, args...)
	return wrap(err, what)
}

// Acknowledge acknowledges an open incident as by; again while acknowledged, it changes
// nothing. ErrIncidentResolved for a resolved one.
func (s *Store) Acknowledge(ctx context.Context, id int64, by Worker) (Incident, error) {
	return s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		switch in.Status {
		case IncidentResolved:
			return ErrIncidentResolved
		case IncidentAcknowledged:
			return nil
		}
		if err := exec(ctx, tx, "acknowledge", `UPDATE incidents SET status = 'acknowledged', acknowledged_by_id = $2,
			acknowledged_at = now(), first_acknowledged_at = coalesce(first_acknowledged_at, now()) WHERE id = $1`, id, by.ID); err != nil {
			return err
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventAcknowledged, userID: by.ID, username: by.Username})
	})
}

// Unacknowledge puts an acknowledged incident back to triggered (the first acknowledgement stays
// counted for the time to acknowledge); a triggered one is left as it is. ErrIncidentResolved
// for a resolved one.
func (s *Store) Unacknowledge(ctx context.Context, id int64, by Worker) error {
	_, err := s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		switch in.Status {
		case IncidentResolved:
			return ErrIncidentResolved
		case IncidentTriggered:
			return nil
		}
		if err := exec(ctx, tx, "unacknowledge", `UPDATE incidents SET status = 'triggered', acknowledged_by_id = NULL,
			acknowledged_at = NULL WHERE id = $1`, id); err != nil {
			return err
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventUnacknowledged, userID: by.ID, username: by.Username})
	})
	return err
}

// Resolve resolves an open incident by hand. It is terminal: a later firing in the group opens
// a new incident. ErrIncidentResolved for a resolved one.
func (s *Store) Resolve(ctx context.Context, id int64, by Worker) (Incident, error) {
	return s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		if in.Status == IncidentResolved {
			return ErrIncidentResolved
		}
		if err := exec(ctx, tx, "resolve", `UPDATE incidents SET status = 'resolved', resolved_at = now(),
			resolution_source = 'manual' WHERE id = $1`, id); err != nil {
			return err
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventResolved, userID: by.ID, username: by.Username})
	})
}

// Assign gives an open incident to the person userID; the event names the assignee (the actor
// is the audit's). Assigning the assignee again changes nothing. ErrIncidentResolved for a
// resolved incident, ErrUnknownUser for no such person.
func (s *Store) Assign(ctx context.Context, id, userID int64) (Incident, error) {
	return s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		if in.Status == IncidentResolved {
			return ErrIncidentResolved
		}
		var username string
		err := tx.QueryRow(ctx, `SELECT username FROM users WHERE id = $1 FOR KEY SHARE`, userID).Scan(&username)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrUnknownUser
		}
		if err != nil {
			return wrap(err, "read assignee")
		}
		if in.AssignedToID != nil && *in.AssignedToID == userID {
			return nil
		}
		if err := exec(ctx, tx, "assign", `UPDATE incidents SET assigned_to_id = $2 WHERE id = $1`, id, userID); err != nil {
			return err
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventAssigned, userID: userID, username: username})
	})
}

// MaxSnooze is the longest snooze.
const MaxSnooze = 168 * time.Hour

// Snooze quietens an open incident for d (0 < d <= MaxSnooze, which the caller checks): it
// leaves the default queue until then, and nothing sweeps it. ErrIncidentResolved for a
// resolved one.
func (s *Store) Snooze(ctx context.Context, id int64, d time.Duration, by Worker) (Incident, error) {
	return s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		if in.Status == IncidentResolved {
			return ErrIncidentResolved
		}
		var until time.Time
		if err := tx.QueryRow(ctx, `UPDATE incidents SET snoozed_until = now() + $2::interval WHERE id = $1
			RETURNING snoozed_until`, id, d.String()).Scan(&until); err != nil {
			return wrap(err, "snooze")
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventSnoozed, userID: by.ID,
			username: by.Username, detail: until.UTC().Format(time.RFC3339)})
	})
}

// Unsnooze ends an open incident's snooze; one not snoozed is left as it is.
// ErrIncidentResolved for a resolved one.
func (s *Store) Unsnooze(ctx context.Context, id int64, by Worker) error {
	_, err := s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		if in.Status == IncidentResolved {
			return ErrIncidentResolved
		}
		if in.SnoozedUntil == nil {
			return nil
		}
		if err := exec(ctx, tx, "unsnooze", `UPDATE incidents SET snoozed_until = NULL WHERE id = $1`, id); err != nil {
			return err
		}
		return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: id, typ: EventUnsnoozed, userID: by.ID, username: by.Username})
	})
	return err
}

// Archive archives a resolved incident (again: unchanged); ErrIncidentOpen for an open one.
func (s *Store) Archive(ctx context.Context, id int64) (Incident, error) {
	return s.act(ctx, id, func(tx pgx.Tx, in Incident) error {
		if in.Status != IncidentResolved {
			return ErrIncidentOpen
		}
		return exec(ctx, tx, "archive", `UPDATE incidents SET archived_at = coalesce(archived_at, now()) WHERE id = $1`, id)
	})
}

// Unarchive takes an incident out of the archive; one not archived is left as it is.
func (s *Store) Unarchive(ctx context.Context, id int64) error {
	_, err := s.act(ctx, id, func(tx pgx.Tx, _ Incident) error {
		return exec(ctx, tx, "unarchive", `UPDATE incidents SET archived_at = NULL WHERE id = $1`, id)
	})
	return err
}

// AddNote appends by's note (checked by the caller: 1 to 4,000 characters) to an incident's
// timeline, resolved or not, and returns it. The incident is held (FOR KEY SHARE) until the
// note is committed: retention, which locks what it deletes, then deletes the note with it or
// finds the incident gone first (ErrNotFound).
func (s *Store) AddNote(ctx context.Context, id int64, content string, by Worker) (IncidentEvent, error) {
	var e IncidentEvent
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO incident_events (incident_id, type, user_id, username, detail)
			SELECT id, 'note', $2, $3, $4 FROM incidents WHERE id = $1 FOR KEY SHARE
			RETURNING `+incidentEventColumns, id, by.ID, by.Username, content).
			Scan(&e.ID, &e.IncidentID, &e.Type, &e.UserID, &e.Username, &e.AlertID, &e.Detail, &e.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		return wrap(err, "add note")
	})
	return e, err
}

// DeleteNote deletes by's note eventID of incident id: ErrNotFound if the incident has no such
// event, ErrNotANote for another kind of event, ErrNotAuthor for someone else's note.
func (s *Store) DeleteNote(ctx context.Context, id, eventID int64, by Worker) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var typ string
		var author *int64
		err := tx.QueryRow(ctx, `SELECT type, user_id FROM incident_events WHERE id = $2 AND incident_id = $1 FOR UPDATE`,
			id, eventID).Scan(&typ, &author)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return wrap(err, "read note")
		case typ != EventNote:
			return ErrNotANote
		case author == nil || *author != by.ID:
			return ErrNotAuthor
		}
		return exec(ctx, tx, "delete note", `DELETE FROM incident_events WHERE id = $1`, eventID)
	})
}
