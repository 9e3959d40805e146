package api

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// eventJSON is a row of audit_events as GET /api/audit shows it.
type eventJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Event      string    `json:"event"`
	ActorKind  string    `json:"actor_kind"`
	ActorID    *int64    `json:"actor_id"` // null: not a user
	ActorName  string    `json:"actor_name"`
	TargetID   *int64    `json:"target_id"` // null: no user
	TargetName string    `json:"target_name"`
	RemoteAddr string    `json:"remote_addr"`
	RequestID  string    `json:"request_id"`
	Detail     string    `json:"detail"`
	// ClientRequestID is the X-Request-Id the client sent: its word, beside the server's id.
	ClientRequestID string `json:"client_request_id"`
}

func toEventJSON(e store.Event) eventJSON {
	j := eventJSON{ID: e.ID, At: e.At, Event: e.Event, ActorKind: string(e.ActorKind), ActorName: e.ActorName,
		TargetName: e.TargetName, RemoteAddr: e.RemoteAddr, RequestID: e.RequestID, Detail: e.Detail,
		ClientRequestID: e.ClientRequestID}
	if e.ActorID != 0 {
		j.ActorID = &e.ActorID
	}
	if e.TargetID != 0 {
		j.TargetID = &e.TargetID
	}
	return j
}

// maxAuditPage bounds the events one GET /api/audit answers.
const maxAuditPage = 500

var eventFilter = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)*(\.\*)?$`)

// ParseEventQuery reads the filters of GET /api/audit and `terdut-server audit`: before (an
// event id: the page after the one that ended there), limit (1 to 500, default 50), actor (a
// user id, or operator, cli, migration or provider) and event (a name such as user.created,
// or user.* for every event under user). It returns a sentence for a person when one is wrong.
func ParseEventQuery(get func(string) string) (store.EventQuery, string) {
	q := store.EventQuery{Limit: 50}
	if v := get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return q, "before must be the id of an event, a positive whole number."
		}
		q.Before = n
	}
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			return q, "limit must be a whole number from 1 to 500."
		}
		q.Limit = n
	}
	switch v := store.ActorKind(get("actor")); v {
	case "":
	case store.ActorKindOperator, store.ActorKindCLI, store.ActorKindMigration, store.ActorKindProvider:
		q.ActorKind = v
	default:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n <= 0 {
			return q, "actor must be a user's id, or one of operator, cli, migration, provider."
		}
		q.ActorID = n
	}
	if v := get("event"); v != "" {
		if len(v) > 64 || !eventFilter.MatchString(v) {
			return q, "event must be an event's name, such as user.created, or a prefix such as user.*."
		}
		q.Event = v
	}
	return q, ""
}

// AuditPage is a page of audit events, newest first, as GET /api/audit and `terdut-server
// audit` answer it: NextBefore is the value of before that gives the next page, null after the
// last.
type AuditPage struct {
	Events     []eventJSON `json:"events"`
	NextBefore *int64      `json:"next_before"`
}

// PageQuery is q as the store is to be asked for a page: one event more than the page holds,
// which tells NewAuditPage whether there is a next page.
func PageQuery(q store.EventQuery) store.EventQuery {
	q.Limit++
	return q
}

// NewAuditPage is the page of q (of q.Limit events) from events, which PageQuery(q) selected:
// when there is one more than the page holds, NextBefore gives the next page; null otherwise,
// even when the last page is full.
func NewAuditPage(events []store.Event, q store.EventQuery) AuditPage {
	more := len(events) > q.Limit
	if more {
		events = events[:q.Limit]
	}
	page := AuditPage{Events: make([]eventJSON, 0, len(events))}
	for _, e := range events {
		page.Events = append(page.Events, toEventJSON(e))
	}
	if more {
		page.NextBefore = &events[len(events)-1].ID
	}
	return page
}

// handleAudit answers the audit events that the query's filters select (ParseEventQuery).
func (s *server) handleAudit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, problem := ParseEventQuery(r.URL.Query().Get)
		if problem != "" {
			s.writeError(w, r, errBadRequest("invalid_query", problem))
			return
		}
		events, err := s.store.Events(r.Context(), PageQuery(q))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, NewAuditPage(events, q))
	})
}
