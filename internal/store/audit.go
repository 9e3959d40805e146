package store

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ActorKind is who did an administrative action, as audit_events records it.
type ActorKind string

// The actors of audit_events: a user (by API key or session), the operator, an administrator
// at the shell, a migration, or the single sign-on provider (a person provisioned, or their
// role changed, on its word).
const (
	ActorKindUser      ActorKind = "user"
	ActorKindOperator  ActorKind = "operator"
	ActorKindCLI       ActorKind = "cli"
	ActorKindMigration ActorKind = "migration"
	ActorKindProvider  ActorKind = "provider"
)

// Event is one row of audit_events, the append-only record of administrative actions.
type Event struct {
	ID         int64
	At         time.Time // set by the database: always the time of the insert
	Event      string    // a stable name such as "user.created"
	ActorKind  ActorKind
	ActorID    int64  // the acting user, for ActorKindUser; 0: none
	ActorName  string // the acting user's name, the operator's method, the provider's issuer
	TargetID   int64  // the user acted on; 0: none
	TargetName string
	RemoteAddr string
	RequestID  string // the server's id of the request
	Detail     string
	// ClientRequestID is the X-Request-Id the client sent, if any: the client's word, beside
	// the server's RequestID, never in its place.
	ClientRequestID string
}

// AppendEvent writes e (its ID and At are the database's). Text fields are cut to the
// columns' bounds, so that caller input can never fail the write.
func (s *Store) AppendEvent(ctx context.Context, e Event) error {
	return wrap(insertEvent(ctx, s.pool, e), "write audit event")
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertEvent(ctx context.Context, db execer, e Event) error {
	_, err := db.Exec(ctx, `INSERT INTO audit_events (event, actor_kind, actor_id, actor_name, target_id,
		target_name, remote_addr, request_id, detail, client_request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		e.Event, e.ActorKind, nullID(e.ActorID), clip(e.ActorName, 512), nullID(e.TargetID), clip(e.TargetName, 512),
		clip(e.RemoteAddr, 64), clip(e.RequestID, 64), clip(e.Detail, 1024), clip(e.ClientRequestID, 64))
	return err
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// EventQuery selects audit events, newest first.
type EventQuery struct {
	Before    int64     // only events with a smaller ID (the previous page's last); 0: from the newest
	Limit     int       // at most this many; 0 or less: 50
	ActorID   int64     // only this user's actions; 0: anyone's
	ActorKind ActorKind // only this kind of actor; "": any
	Event     string    // only this event, or those under it when it ends in ".*"; "": all
}

const eventColumns = `id, at, event, actor_kind, coalesce(actor_id, 0) AS actor_id, actor_name,
	coalesce(target_id, 0) AS target_id, target_name, remote_addr, request_id, detail, client_request_id`

// An audit page is the newest rows that match, read backwards on an index whose order is
// (filter column, id): audit_events_actor_id_idx, audit_events_actor_kind_idx (migration
// 00017) or audit_events_event_idx. The planner must not read it another way. Asked for
// WHERE event = 'user.created' ORDER BY id DESC, it estimates that half the rows match, spread
// evenly, and walks the primary key backwards, filtering; but rows of one kind come in runs
// (a bulk import, a month of sign-ups), and the newest run of another kind may be a million
// rows long. So the filter's own column leads the order: a row comparison starts the scan at
// (value, before) and ORDER BY column DESC, id DESC is an order only that index gives, so it
// is read from there, backwards, and the first rows of the value are the page. The outer
// WHERE drops the rows of the next values that a page of fewer than limit rows reaches.
// Its verbs: the column, the value, the other filters, the parameter of before.
// The columns are qualified: unqualified, ORDER BY actor_id would name the output column,
// coalesce(actor_id, 0), which no index holds.
const eventsOnIndex = `SELECT * FROM (SELECT ` + eventColumns + ` FROM audit_events t
		WHERE (t.%[1]s, t.id) < (%[2]s, $%[4]d) AND %[3]s ORDER BY t.%[1]s DESC, t.id DESC LIMIT {{limit}}) page
	WHERE page.%[1]s = %[2]s`

// eventsUnderPrefix selects the newest events whose name starts with a prefix, in a time that
// does not grow with the table: a range of names (event >= 'user.' AND event < 'user/') would
// read and sort every matching row to find the newest, and starts_with no index serves at all.
// Event names are a small vocabulary, so it walks the distinct names on audit_events_event_idx
// (one index descent each, whatever the database's collation), keeps those under the prefix,
// and reads the newest page of each as eventsOnIndex does; the newest limit of those are the
// answer. Its verbs: a page of eventsOnIndex for n.event, the prefix's parameter.
const eventsUnderPrefix = `WITH RECURSIVE names(event) AS (
		(SELECT event FROM audit_events ORDER BY event LIMIT 1)
		UNION ALL
		SELECT (SELECT a.event FROM audit_events a WHERE a.event > n.event ORDER BY a.event LIMIT 1)
		FROM names n WHERE n.event IS NOT NULL)
	SELECT e.* FROM names n CROSS JOIN LATERAL (%[1]s) e
	WHERE starts_with(n.event, $%[2]d)
	ORDER BY e.id DESC LIMIT {{limit}}`

// Events returns the audit events q selects, newest first. Every filter is served by an
// index (audit_events_actor_id_idx, audit_events_actor_kind_idx, audit_events_event_idx), so
// that a page costs the same at any size of the table, in the plan made for its values and in
// the generic plan of a prepared statement alike (see eventsOnIndex).
func (s *Store) Events(ctx context.Context, q EventQuery) ([]Event, error) {
	query, args := eventsQuery(q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap(err, "read audit events")
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	return events, wrap(err, "read audit events")
}

// eventsQuery is the statement and arguments of Events. The limit is written into the
// statement (a whole number, never text): as a parameter, a prepared statement's generic plan
// would be costed for a tenth of the table, never chosen over a plan made afresh, and every
// page would pay for planning, more the larger the table.
func eventsQuery(q EventQuery) (string, []any) {
	query, args := eventsStatement(q)
	if q.Limit <= 0 {
		q.Limit = 50
	}
	return strings.ReplaceAll(query, "{{limit}}", strconv.Itoa(q.Limit)), args
}

func eventsStatement(q EventQuery) (string, []any) {
	var args []any
	where := []string{"TRUE"}
	param := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// lead is the filter whose index reads the page (see eventsOnIndex): an event (or the
	// names under a prefix), else an actor, else an actor's kind; the others filter the rows
	// that index reads.
	var leadColumn, leadValue string
	lead := func(column, value string) {
		if leadColumn == "" {
			leadColumn, leadValue = column, value
			return
		}
		where = append(where, column+" = "+value)
	}
	prefix, isPrefix := strings.CutSuffix(q.Event, "*")
	switch {
	case isPrefix:
		lead("event", "n.event")
	case q.Event != "":
		lead("event", param(q.Event))
	}
	if q.ActorID > 0 {
		lead("actor_id", param(q.ActorID))
	}
	if q.ActorKind != "" {
		lead("actor_kind", param(string(q.ActorKind)))
	}
	if leadColumn == "" {
		if q.Before > 0 {
			where = append(where, "id < "+param(q.Before))
		}
		return `SELECT ` + eventColumns + ` FROM audit_events WHERE ` + strings.Join(where, " AND ") +
			` ORDER BY id DESC LIMIT {{limit}}`, args
	}
	before := int64(math.MaxInt64)
	if q.Before > 0 {
		before = q.Before
	}
	args = append(args, before)
	page := fmt.Sprintf(eventsOnIndex, leadColumn, leadValue, strings.Join(where, " AND "), len(args))
	if !isPrefix {
		return page + ` ORDER BY page.id DESC`, args
	}
	return fmt.Sprintf(eventsUnderPrefix, page, len(args)+1), append(args, prefix)
}

// SweepEvents deletes the audit events older than retention, in batches, and returns how many;
// retention 0 keeps them all. The table's trigger refuses every other deletion (see migration
// 00009): the transaction names the retention in terdut.audit_retention, and only rows older
// than it, and than a day, may go.
func (s *Store) SweepEvents(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, nil
	}
	interval := fmt.Sprintf("%d microseconds", retention.Microseconds())
	var total int64
	for {
		var n int64
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('terdut.audit_retention', $1, true)`, interval); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM audit_events WHERE id IN (
				SELECT id FROM audit_events WHERE at < now() - $1::interval
				ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)`, interval, sweepBatch)
			n = tag.RowsAffected()
			return err
		})
		total += n
		if err != nil {
			return total, wrap(err, "sweep audit events")
		}
		if n < sweepBatch {
			return total, nil
		}
	}
}

// appendClaimEvent writes the audit_events row of a claim or reset, in the transaction of its
// bootstrap_audit row; its target is the principal the claim row names.
func appendClaimEvent(ctx context.Context, tx pgx.Tx, action string, who AuditInfo, gen int64, st State, detail string) error {
	e := eventOf(action, who, gen, st, detail)
	_, err := tx.Exec(ctx, `INSERT INTO audit_events (event, actor_kind, actor_name, target_id, target_name,
		remote_addr, detail, request_id, client_request_id) SELECT $1, $2, $3, principal_id, $4, $5, $6, $7, $8
		FROM bootstrap_state`,
		e.Event, e.ActorKind, clip(e.ActorName, 512), PrincipalUsername, clip(e.RemoteAddr, 64), clip(e.Detail, 1024),
		clip(e.RequestID, 64), clip(e.ClientRequestID, 64))
	return wrap(err, "write audit event")
}

// eventOf is the audit_events row of a claim or reset, written beside its bootstrap_audit row.
func eventOf(action string, who AuditInfo, gen int64, st State, detail string) Event {
	e := Event{Event: "bootstrap." + action, RemoteAddr: who.RemoteAddr, RequestID: who.RequestID,
		ClientRequestID: who.ClientRequestID}
	switch who.Actor {
	case ActorOperator:
		e.ActorKind, e.ActorName = ActorKindOperator, string(who.Method)
		if who.Subject != "" {
			e.ActorName += " " + who.Subject
		}
	case ActorMigration:
		e.ActorKind = ActorKindMigration
	default:
		e.ActorKind = ActorKindCLI
	}
	e.Detail = fmt.Sprintf("generation %d; %s", gen, st)
	if detail != "" {
		e.Detail += "; " + detail
	}
	return e
}
