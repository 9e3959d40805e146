package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The on-call schedule: one person a UTC day (migrations/00022_schedule.sql). A new incident
// goes to the day's person (createIncident).

// todayUTC is the schedule's today: the database's clock, so that every replica agrees.
const todayUTC = `(now() AT TIME ZONE 'UTC')::date`

// DateLayout is how the schedule writes a day.
const DateLayout = "2006-01-02"

// ErrNotYourDay means a member acted on a day of the schedule another person holds.
var ErrNotYourDay = errors.New("that day is another person's")

// ScheduleEntry is one day of the schedule and the person who holds it.
type ScheduleEntry struct {
	ID        int64
	UserID    int64
	Username  string
	Date      time.Time // midnight UTC
	CreatedAt time.Time
}

// DatesHeldError refuses an assignment of days other people hold.
type DatesHeldError struct {
	Held []ScheduleEntry // in order of date
}

func (e *DatesHeldError) Error() string { return "already on call: " + e.Days() }

// Days names the days held and their holders: "2030-01-07 (alice), 2030-01-08 (bob)".
func (e *DatesHeldError) Days() string {
	held := make([]string, len(e.Held))
	for i, h := range e.Held {
		held[i] = h.Date.Format(DateLayout) + " (" + h.Username + ")"
	}
	return strings.Join(held, ", ")
}

const scheduleColumns = `s.id, s.user_id, u.username, s.date, s.created_at`

const scheduleFrom = ` FROM schedule s JOIN users u ON u.id = s.user_id`

func collectSchedule(rows pgx.Rows, what string) ([]ScheduleEntry, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ScheduleEntry, error) {
		var e ScheduleEntry
		err := row.Scan(&e.ID, &e.UserID, &e.Username, &e.Date, &e.CreatedAt)
		return e, err
	})
	if out == nil {
		out = []ScheduleEntry{}
	}
	return out, wrap(err, what)
}

// days writes dates as the statements take them, which casts them from text: a date is
// written the same in every statement mode.
func days(dates []time.Time) []string {
	out := make([]string, len(dates))
	for i, d := range dates {
		out[i] = d.Format(DateLayout)
	}
	return out
}

// Schedule returns the days from from to to (both included), in order of date.
func (s *Store) Schedule(ctx context.Context, from, to time.Time) ([]ScheduleEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+scheduleFrom+`
		WHERE s.date BETWEEN $1::text::date AND $2::text::date ORDER BY s.date`, from.Format(DateLayout), to.Format(DateLayout))
	if err != nil {
		return nil, wrap(err, "read the schedule")
	}
	return collectSchedule(rows, "read the schedule")
}

// OnCall returns today's (UTC) entry; ErrNotFound when nobody holds today.
func (s *Store) OnCall(ctx context.Context) (ScheduleEntry, error) {
	var e ScheduleEntry
	err := s.pool.QueryRow(ctx, `SELECT `+scheduleColumns+scheduleFrom+` WHERE s.date = `+todayUTC).
		Scan(&e.ID, &e.UserID, &e.Username, &e.Date, &e.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, wrap(err, "read today's on-call person")
}

// ScheduleAssignment gives one person days of the schedule.
type ScheduleAssignment struct {
	UserID int64
	Dates  []time.Time // days at midnight UTC; one given twice counts once
	// Replace takes over the days other people hold; without it, any such day refuses the
	// whole assignment (*DatesHeldError).
	Replace bool
	// Member says the caller is no admin: a Replace that would take another person's day
	// refuses the whole assignment (ErrNotYourDay).
	Member bool
}

// ScheduleChange is what an assignment did.
type ScheduleChange struct {
	Entries []ScheduleEntry // every day of the assignment, in order of date
	Taken   []ScheduleEntry // the days taken from other people, as they were
}

// scheduleLockKey names the lock that takes turns of the schedule's writes on every replica.
const scheduleLockKey = "schedule"

func lockSchedule(ctx context.Context, tx pgx.Tx) error {
	return exec(ctx, tx, "lock the schedule", `SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))`, scheduleLockKey)
}

// AssignSchedule gives a.UserID the days a.Dates, all or none of them: the schedule's writes
// take turns (a lock every replica shares), so two assignments of the same day at once are one
// after the other, and the second finds it held. A day the person holds already stays as it
// is. ErrUnknownUser for no such person, *DatesHeldError and ErrNotYourDay as
// ScheduleAssignment says.
func (s *Store) AssignSchedule(ctx context.Context, a ScheduleAssignment) (ScheduleChange, error) {
	var c ScheduleChange
	dates := slices.Compact(slices.Sorted(slices.Values(days(a.Dates))))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c = ScheduleChange{}
		if err := lockSchedule(ctx, tx); err != nil {
			return err
		}
		// The person stays until the commit: a deletion waits, then deletes their new days.
		err := tx.QueryRow(ctx, `SELECT 1 FROM users WHERE id = $1 FOR KEY SHARE`, a.UserID).Scan(new(int))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrUnknownUser
		}
		if err != nil {
			return wrap(err, "read the person")
		}
		rows, err := tx.Query(ctx, `SELECT `+scheduleColumns+scheduleFrom+`
			WHERE s.date = ANY($1::text[]::date[]) AND s.user_id <> $2 ORDER BY s.date`, dates, a.UserID)
		if err != nil {
			return wrap(err, "read the days")
		}
		if c.Taken, err = collectSchedule(rows, "read the days"); err != nil {
			return err
		}
		switch {
		case len(c.Taken) > 0 && !a.Replace:
			return &DatesHeldError{Held: c.Taken}
		case len(c.Taken) > 0 && a.Member:
			return ErrNotYourDay
		}
		// A day taken over gets a new id, so that the old one names nobody's day any more. It
		// is updated, not deleted and inserted again: a new incident that reads the day at once
		// (createIncident) waits for the commit and reads the new holder, where a deleted row
		// would show it nobody.
		taken := make([]int64, len(c.Taken))
		for i, e := range c.Taken {
			taken[i] = e.ID
		}
		if err := exec(ctx, tx, "take over days", `UPDATE schedule SET id = DEFAULT, user_id = $2, created_at = now()
			WHERE id = ANY($1)`, taken, a.UserID); err != nil {
			return err
		}
		if err := exec(ctx, tx, "assign days", `INSERT INTO schedule (user_id, date)
			SELECT $1, d::date FROM pg_catalog.unnest($2::text[]) AS d ORDER BY d
			ON CONFLICT (date) DO NOTHING`, a.UserID, dates); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT `+scheduleColumns+scheduleFrom+`
			WHERE s.date = ANY($1::text[]::date[]) ORDER BY s.date`, dates)
		if err != nil {
			return wrap(err, "read the days")
		}
		if c.Entries, err = collectSchedule(rows, "read the days"); err != nil {
			return err
		}
		if len(c.Entries) != len(dates) {
			return fmt.Errorf("assign days: %d of %d days written", len(c.Entries), len(dates))
		}
		return nil
	})
	return c, err
}

// DeleteScheduleEntry deletes the entry id and returns it. With onlyOf (not 0), the entry must
// be that person's: ErrNotYourDay otherwise. ErrNotFound if there is none.
func (s *Store) DeleteScheduleEntry(ctx context.Context, id, onlyOf int64) (ScheduleEntry, error) {
	var e ScheduleEntry
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockSchedule(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT `+scheduleColumns+scheduleFrom+` WHERE s.id = $1`, id).
			Scan(&e.ID, &e.UserID, &e.Username, &e.Date, &e.CreatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return wrap(err, "read the day")
		case onlyOf != 0 && e.UserID != onlyOf:
			return ErrNotYourDay
		}
		return exec(ctx, tx, "delete the day", `DELETE FROM schedule WHERE id = $1`, id)
	})
	return e, err
}
