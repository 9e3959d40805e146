package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// loadPeople is how many on-call people work the loaded incidents.
const loadPeople = 8

// incidentDB is one database of the incident half: an integration's alerts, incidents,
// occurrences and timelines, loaded in bulk (scale_incidents_sql.go), and who acts on them.
type incidentDB struct {
	name        string
	url         string
	occurrences int // incident_alerts rows, a multiple of 1,000
	st          *store.Store
	reader      apitest.Person // an on-call person, whose API key reads
	key         string         // the integration's key, for the webhook
	loaded      time.Duration  // how long the bulk load took, VACUUM ANALYZE included
	steps       string         // and how long each of its steps
	checked     time.Duration  // how long checking its invariants took
}

// newIncidentDB creates, migrates and claims a database, makes an integration and the on-call
// people, loads occurrences occurrences (and a tenth as many incidents) into it, and checks the
// invariants the server relies on.
func newIncidentDB(tb testing.TB, ctx context.Context, c interface{ URL(string) string }, name string, occurrences int) (*incidentDB, error) {
	tb.Helper()
	if occurrences < 1000 || occurrences%1000 != 0 {
		return nil, fmt.Errorf("%d occurrences: want a multiple of 1000", occurrences)
	}
	url, st, admin, err := newClaimedDB(tb, ctx, c, name)
	if err != nil {
		return nil, err
	}
	db := &incidentDB{name: name, url: url, occurrences: occurrences, st: st}
	var people []apitest.Person
	for i := range loadPeople {
		people = append(people, apitest.MustPerson(tb, st, fmt.Sprintf("oncall-%d", i+1), store.RoleMember))
	}
	db.reader = people[0]
	if _, db.key, err = st.CreateIntegration(ctx, store.NewIntegration{Name: "alertmanager-prod", CreatedBy: admin.User.ID}); err != nil {
		return nil, fmt.Errorf("create integration on %s: %w", name, err)
	}
	start := time.Now()
	if err := db.load(ctx, people); err != nil {
		return nil, fmt.Errorf("load %d occurrences into %s: %w", occurrences, name, err)
	}
	db.loaded = time.Since(start)
	start = time.Now()
	if err := checkIncidents(ctx, st.Pool(), occurrences); err != nil {
		return nil, fmt.Errorf("%s: the load is not what the server would have written: %w", name, err)
	}
	db.checked = time.Since(start)
	return db, nil
}

// load plans and writes the rows on one connection of its own (the plan is in temporary
// tables of its session), then VACUUM ANALYZE and a checkpoint.
func (db *incidentDB) load(ctx context.Context, people []apitest.Person) error {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var integrationID int64
	if err := conn.QueryRow(ctx, `SELECT id FROM integrations`).Scan(&integrationID); err != nil {
		return fmt.Errorf("the integration: %w", err)
	}
	ids, names := make([]int64, len(people)), make([]string, len(people))
	for i, p := range people {
		ids[i], names[i] = p.User.ID, p.User.Username
	}
	var steps []string
	step := func(what, sql string, args ...any) error {
		start := time.Now()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		steps = append(steps, fmt.Sprintf("%s %s", what, time.Since(start).Round(100*time.Millisecond)))
		return nil
	}
	for _, s := range []struct {
		what, sql string
		args      []any
	}{
		{"people", loadPeopleSQL, []any{ids, names}},
		{"plan of incidents", loadIncidentPlanSQL, []any{db.occurrences / 10, len(people), loadOpen}},
		{"plan of occurrences", loadOccurrencePlanSQL, nil},
		{"analyze plans", `ANALYZE plan_i, plan_o`, nil},
		{"incidents", loadIncidentsSQL, []any{integrationID}},
		{"alerts", loadAlertsSQL, []any{integrationID}},
		{"occurrences", loadOccurrencesSQL, nil},
		{"events", loadEventsSQL, nil},
		{"identities", loadIdentitiesSQL, nil},
		{"VACUUM ANALYZE", `VACUUM ANALYZE alerts, incidents, incident_alerts, incident_events`, nil},
		// The load's writes reach the disk now, not during the first rounds.
		{"checkpoint", `CHECKPOINT`, nil},
	} {
		if err := step(s.what, s.sql, s.args...); err != nil {
			return err
		}
	}
	db.steps = strings.Join(steps, ", ")
	return nil
}
