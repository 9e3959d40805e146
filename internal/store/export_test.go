package store

import (
	"context"
	"fmt"
	"time"
)

// The statements the plan tests (plans_test.go) explain: what the store runs, as it runs it.

// SweepStatements are Sweep's statements for sessions, API keys and set-password links, as SQL
// and arguments after the batch size ($1).
func SweepStatements() map[string]struct {
	SQL  string
	Args []any
} {
	out := map[string]struct {
		SQL  string
		Args []any
	}{}
	add := func(name string, st sweepStatement) {
		out[name] = struct {
			SQL  string
			Args []any
		}{st.sql, st.args}
	}
	add("sessions revoked", sweepSessions[0])
	add("sessions expired", sweepSessions[1])
	add("api_keys revoked", sweepAPIKeys[0])
	add("api_keys expired", sweepAPIKeys[1])
	add("password_links expired", sweepPasswordLinks)
	return out
}

// EventsQuery is Events' statement and arguments for q.
var EventsQuery = eventsQuery

// AlertsQuery is Alerts' statement and arguments for q.
var AlertsQuery = alertsQuery

// UsersAfterQuery is UsersAfter's statement ($1 after, $2 limit).
const UsersAfterQuery = usersAfterQuery

// The two forms of the API-key lookup (apikeys.go), which must answer alike: the statement,
// and the call of api_key_owner in the schema public, where the tests' databases keep it.
var (
	AuthenticateAPIKeySQL = authenticateAPIKeySQL
	APIKeyOwnerSQL        = fmt.Sprintf(apiKeyOwnerCall, `"public"`)
)

// APIKeyLookup is the API-key lookup st makes in its statement mode.
func APIKeyLookup(ctx context.Context, st *Store) (string, error) { return st.apiKeyLookup(ctx) }

// IngestLookups are the statements of a notification that find rows by its values, as SQL,
// with the index each must seek.
var IngestLookups = map[string]struct{ SQL, Index string }{
	"find occurrences":    {findOccurrencesSQL, "incident_alerts_occurrence_key"},
	"join":                {joinSQL, "alerts_integration_fingerprint_key"},
	"resolve occurrences": {resolveOccurrencesSQL, "incident_alerts_pkey"},
}

// IngestSettingsSQL sets what a notification's transaction plans with.
const IngestSettingsSQL = `SELECT ` + ingestSettings

// Statement is a statement the store runs, and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// StatsStatements are the statistics' statements (stats.go).
func StatsStatements() map[string]Statement {
	return map[string]Statement{
		"alerts":    {alertStatsSQL, nil},
		"incidents": {incidentStatsSQL, nil},
		"top":       {countsSQL, []any{"name", 10}},
		"by hour":   {countsSQL, []any{"hour", 24}},
		"by day":    {countsSQL, []any{"day", 7}},
	}
}

// RetentionStatements are Retain's statements that find what to delete, with their arguments
// for olderThan and a batch.
func RetentionStatements(olderThan time.Duration, batch int) map[string]Statement {
	return map[string]Statement{
		"incidents": {retainIncidentsSQL(batch), []any{olderThan, occurrencesPerIncident * batch}},
		"alerts":    {retainAlertsSQL(batch), []any{olderThan}},
	}
}
