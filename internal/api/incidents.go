package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The incident queue and its actions (../shared/incident-contract.md). Any signed-in person
// works incidents; every action is in the audit, with its actor.

const (
	defaultListLimit = 100
	maxListLimit     = 1000
	maxNoteRunes     = 4000
)

// listLimit reads limit: absent, defaultListLimit; above maxListLimit, maxListLimit; anything
// but a whole number from 1, an error.
func listLimit(q url.Values) (int, error) {
	if !q.Has("limit") {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 {
		return 0, errBadRequest("invalid_query", "limit must be a whole number from 1 (at most 1000 are answered).")
	}
	return min(n, maxListLimit), nil
}

// queryFlag reads a filter that is either absent (false) or "true"; "false" is taken as absent.
func queryFlag(q url.Values, name string) (bool, error) {
	switch q.Get(name) {
	case "":
		if q.Has(name) {
			return false, errBadRequest("invalid_query", name+" must be true, or absent.")
		}
		return false, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errBadRequest("invalid_query", name+" must be true, or absent.")
}

func (s *server) handleIncidentList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var query store.IncidentQuery
		var err error
		switch st := q.Get("status"); st {
		case "", store.IncidentTriggered, store.IncidentAcknowledged, store.IncidentResolved:
			query.Status = st
		default:
			s.writeError(w, r, errBadRequest("invalid_query", "status must be triggered, acknowledged or resolved (absent: the open ones)."))
			return
		}
		if query.Archived, err = queryFlag(q, "archived"); err == nil {
			if query.Snoozed, err = queryFlag(q, "snoozed"); err == nil {
				query.Limit, err = listLimit(q)
			}
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		list, err := s.store.Incidents(r.Context(), query)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out := make([]incidentJSON, len(list))
		for i, in := range list {
			out[i] = toIncidentJSON(in)
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func (s *server) handleIncidentGet() http.Handler {
	return s.withIncident(func(w http.ResponseWriter, r *http.Request, id int64) {
		in, err := s.store.Incident(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, incidentDetailJSON{incidentJSON: toIncidentJSON(in), Alerts: toAlertsJSON(in.Alerts),
			AlertCount: in.AlertCount})
	})
}

func (s *server) handleIncidentTimeline() http.Handler {
	return s.withIncident(func(w http.ResponseWriter, r *http.Request, id int64) {
		events, err := s.store.Timeline(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out := make([]incidentEventJSON, len(events))
		for i, e := range events {
			out[i] = toIncidentEventJSON(e)
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// withIncident hands h the incident id of the path.
func (s *server) withIncident(h func(w http.ResponseWriter, r *http.Request, id int64)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r, id)
	})
}

// worker is the request's person, as the timeline names them.
func worker(r *http.Request) store.Worker {
	u := principalFrom(r.Context()).User
	return store.Worker{ID: u.ID, Username: u.Username}
}

// incidentAction answers an action that returns the incident (200 and the incident) or nothing
// (204), and records it in the audit as event.
func (s *server) incidentAction(event string, act func(r *http.Request, id int64) (*store.Incident, string, error)) http.Handler {
	return s.withIncident(func(w http.ResponseWriter, r *http.Request, id int64) {
		in, detail, err := act(r, id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		e := store.Event{Event: event, Detail: strings.TrimSpace(fmt.Sprintf("incident %d %s", id, detail))}
		s.audit(r, e)
		if in == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, toIncidentJSON(*in))
	})
}

// returning adapts a store action that returns the incident.
func returning(in store.Incident, err error) (*store.Incident, string, error) {
	if err != nil {
		return nil, "", err
	}
	return &in, "", nil
}

func (s *server) handleAcknowledge() http.Handler {
	return s.incidentAction("incident.acknowledged", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return returning(s.store.Acknowledge(r.Context(), id, worker(r)))
	})
}

func (s *server) handleUnacknowledge() http.Handler {
	return s.incidentAction("incident.unacknowledged", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return nil, "", s.store.Unacknowledge(r.Context(), id, worker(r))
	})
}

func (s *server) handleResolve() http.Handler {
	return s.incidentAction("incident.resolved", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return returning(s.store.Resolve(r.Context(), id, worker(r)))
	})
}

func (s *server) handleAssign() http.Handler {
	type request struct {
		UserID int64 `json:"user_id"`
	}
	return s.incidentAction("incident.assigned", func(r *http.Request, id int64) (*store.Incident, string, error) {
		req, err := decodeJSON[request](nil, r)
		if err != nil {
			return nil, "", err
		}
		if req.UserID <= 0 {
			return nil, "", errBadRequest("invalid_user", "user_id must name a person (a positive id).")
		}
		in, _, err := returning(s.store.Assign(r.Context(), id, req.UserID))
		return in, fmt.Sprintf("to user %d", req.UserID), err
	})
}

func (s *server) handleSnooze() http.Handler {
	type request struct {
		Duration string `json:"duration"`
	}
	return s.incidentAction("incident.snoozed", func(r *http.Request, id int64) (*store.Incident, string, error) {
		req, err := decodeJSON[request](nil, r)
		if err != nil {
			return nil, "", err
		}
		d, err := time.ParseDuration(req.Duration)
		if err != nil || d <= 0 || d > store.MaxSnooze {
			return nil, "", errBadRequest("invalid_duration", "duration must be a Go duration above 0 and at most 168h, such as 30m or 2h.")
		}
		in, _, err := returning(s.store.Snooze(r.Context(), id, d, worker(r)))
		return in, "for " + d.String(), err
	})
}

func (s *server) handleUnsnooze() http.Handler {
	return s.incidentAction("incident.unsnoozed", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return nil, "", s.store.Unsnooze(r.Context(), id, worker(r))
	})
}

func (s *server) handleArchive() http.Handler {
	return s.incidentAction("incident.archived", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return returning(s.store.Archive(r.Context(), id))
	})
}

func (s *server) handleUnarchive() http.Handler {
	return s.incidentAction("incident.unarchived", func(r *http.Request, id int64) (*store.Incident, string, error) {
		return nil, "", s.store.Unarchive(r.Context(), id)
	})
}

func (s *server) handleNoteAdd() http.Handler {
	type request struct {
		Content string `json:"content"`
	}
	return s.withIncident(func(w http.ResponseWriter, r *http.Request, id int64) {
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		content := strings.TrimSpace(req.Content)
		if n := utf8.RuneCountInString(content); n < 1 || n > maxNoteRunes {
			s.writeError(w, r, errBadRequest("invalid_note", "A note is 1 to 4,000 characters (after trimming spaces)."))
			return
		}
		e, err := s.store.AddNote(r.Context(), id, content, worker(r))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "incident.note_added", Detail: fmt.Sprintf("incident %d note %d", id, e.ID)})
		writeJSON(w, http.StatusCreated, toIncidentEventJSON(e))
	})
}

func (s *server) handleNoteDelete() http.Handler {
	return s.withIncident(func(w http.ResponseWriter, r *http.Request, id int64) {
		eventID, err := pathID(r, "eventID")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.store.DeleteNote(r.Context(), id, eventID, worker(r)); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "incident.note_deleted", Detail: fmt.Sprintf("incident %d note %d", id, eventID)})
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleAlertList is the feed: GET /api/alerts?status=&archived=true&limit=N.
func (s *server) handleAlertList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var query store.AlertQuery
		switch st := q.Get("status"); st {
		case "", store.AlertFiring, store.AlertResolved:
			query.Status = st
		default:
			s.writeError(w, r, errBadRequest("invalid_query", "status must be firing or resolved (absent: all)."))
			return
		}
		var err error
		if query.Archived, err = queryFlag(q, "archived"); err == nil {
			query.Limit, err = listLimit(q)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		alerts, err := s.store.Alerts(r.Context(), query)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAlertsJSON(alerts))
	})
}

func (s *server) handleAlertGet() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		a, err := s.store.AlertByID(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAlertJSON(a))
	})
}
