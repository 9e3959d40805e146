package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The on-call schedule (../shared/incident-contract.md): one person a UTC day. Any signed-in
// person reads it; admins assign and remove anyone's days, a member only their own, and only an
// admin takes over a day another person holds. Every change is in the audit, with its actor.

// maxScheduleDays bounds the days of one GET /api/schedule (from and to included) and of one
// assignment: a leap year.
const maxScheduleDays = 366

type scheduleEntryJSON struct {
	ID        int64     `json:"id"`
	UserID    int64     `json:"user_id"`
	Username  string    `json:"username"`
	Date      string    `json:"date"` // YYYY-MM-DD
	CreatedAt time.Time `json:"created_at"`
}

func toScheduleJSON(entries []store.ScheduleEntry) []scheduleEntryJSON {
	out := make([]scheduleEntryJSON, len(entries))
	for i, e := range entries {
		out[i] = scheduleEntryJSON{ID: e.ID, UserID: e.UserID, Username: e.Username, Date: e.Date.Format(store.DateLayout),
			CreatedAt: e.CreatedAt.UTC()}
	}
	return out
}

var (
	errNoOnCall = &apiError{Status: http.StatusNotFound, Code: "no_on_call", Message: "no one is on call today"}
	// errOthersSchedule refuses a member's assignment of another person.
	errOthersSchedule = &apiError{Status: http.StatusForbidden, Code: "not_your_day",
		Message: "A member puts only themselves on call: user_id must be your own id (an admin assigns anyone)."}
)

// parseDay reads a day as YYYY-MM-DD and nothing else: a real date of the years 1 to 9999.
func parseDay(s string) (time.Time, bool) {
	d, err := time.Parse(store.DateLayout, s)
	return d, err == nil && d.Format(store.DateLayout) == s && d.Year() >= 1
}

// queryDay reads the parameter name of q: given once, a day.
func queryDay(q url.Values, name string) (time.Time, error) {
	if len(q[name]) != 1 {
		return time.Time{}, errBadRequest("invalid_query", "from and to are both required, once each: days as YYYY-MM-DD, such as ?from=2030-01-01&to=2030-01-31.")
	}
	d, ok := parseDay(q.Get(name))
	if !ok {
		return time.Time{}, errBadRequest("invalid_query", name+" must be a day as YYYY-MM-DD, such as 2030-01-07.")
	}
	return d, nil
}

// handleScheduleList is GET /api/schedule?from=&to=: the days from from to to, both included.
func (s *server) handleScheduleList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		from, err := queryDay(q, "from")
		var to time.Time
		if err == nil {
			to, err = queryDay(q, "to")
		}
		switch {
		case err != nil:
		case to.Before(from):
			err = errBadRequest("invalid_query", "from must not be after to.")
		case to.Sub(from) >= maxScheduleDays*24*time.Hour:
			err = errBadRequest("invalid_query", fmt.Sprintf("from and to span at most %d days, both included.", maxScheduleDays))
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		entries, err := s.store.Schedule(r.Context(), from, to)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toScheduleJSON(entries))
	})
}

// handleScheduleCurrent is GET /api/schedule/current: today's (UTC) entry, 404 with nobody.
func (s *server) handleScheduleCurrent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e, err := s.store.OnCall(r.Context())
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = errNoOnCall
			}
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toScheduleJSON([]store.ScheduleEntry{e})[0])
	})
}

// parseDays reads an assignment's dates: 1 to maxScheduleDays distinct days.
func parseDays(dates []string) ([]time.Time, error) {
	if len(dates) == 0 || len(dates) > maxScheduleDays {
		return nil, errBadRequest("invalid_dates", fmt.Sprintf("dates must list 1 to %d days as YYYY-MM-DD.", maxScheduleDays))
	}
	out := make([]time.Time, len(dates))
	seen := make(map[string]bool, len(dates))
	for i, v := range dates {
		d, ok := parseDay(v)
		if !ok {
			return nil, errBadRequest("invalid_dates", fmt.Sprintf("dates: %q is not a day as YYYY-MM-DD, such as 2030-01-07.", v))
		}
		if seen[v] {
			return nil, errBadRequest("invalid_dates", fmt.Sprintf("dates: %s is listed twice.", v))
		}
		seen[v], out[i] = true, d
	}
	return out, nil
}

// handleScheduleAssign is POST /api/schedule {"user_id", "dates", "replace"}: 201 and every
// day of the assignment, all of them or none.
func (s *server) handleScheduleAssign() http.Handler {
	type request struct {
		UserID  int64    `json:"user_id"`
		Dates   []string `json:"dates"`
		Replace bool     `json:"replace"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if req.UserID <= 0 {
			s.writeError(w, r, errBadRequest("invalid_user", "user_id must name a person (a positive id)."))
			return
		}
		dates, err := parseDays(req.Dates)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		me := principalFrom(r.Context()).User
		member := me.Role != store.RoleAdmin
		if member && req.UserID != me.ID {
			s.writeError(w, r, errOthersSchedule)
			return
		}
		c, err := s.store.AssignSchedule(r.Context(), store.ScheduleAssignment{UserID: req.UserID, Dates: dates,
			Replace: req.Replace, Member: member})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		detail := "days " + scheduleDays(c.Entries)
		if len(c.Taken) > 0 {
			detail += "; taken over: " + (&store.DatesHeldError{Held: c.Taken}).Days()
		}
		s.audit(r, store.Event{Event: "schedule.assigned", TargetID: req.UserID, TargetName: c.Entries[0].Username, Detail: detail})
		writeJSON(w, http.StatusCreated, toScheduleJSON(c.Entries))
	})
}

// scheduleDays lists the entries' days.
func scheduleDays(entries []store.ScheduleEntry) string {
	days := make([]string, len(entries))
	for i, e := range entries {
		days[i] = e.Date.Format(store.DateLayout)
	}
	return strings.Join(days, ", ")
}

// handleScheduleDelete is DELETE /api/schedule/{id}: 204; a member's own days only.
func (s *server) handleScheduleDelete() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		var onlyOf int64
		if me := principalFrom(r.Context()).User; me.Role != store.RoleAdmin {
			onlyOf = me.ID
		}
		e, err := s.store.DeleteScheduleEntry(r.Context(), id, onlyOf)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "schedule.removed", TargetID: e.UserID, TargetName: e.Username,
			Detail: fmt.Sprintf("day %s (entry %d)", e.Date.Format(store.DateLayout), e.ID)})
		w.WriteHeader(http.StatusNoContent)
	})
}
