package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestIngest_RacesOnCallReplaced: round after round, on three replicas, a new incident opens
// while an admin gives today to another person and deletes the one who held it. The incident
// goes to one of them, the old holder or the new, with one "assigned" event that names them;
// never to nobody (someone holds today throughout), and never to a deleted person. In every
// third round the holder is deleted with nobody to replace them: the incident goes to them
// (and is unassigned by the deletion) or to nobody, and no statement fails.
func TestIngest_RacesOnCallReplaced(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustDatabase(t)
	ingester, admin, reader := mustOpen(t, dbURL), mustOpen(t, dbURL), mustOpen(t, dbURL)
	c := mustIntegration(t, reader, "prod")
	today := mustToday(t, reader)
	// Each new incident waits 20 ms between its statement's start, which reads the day, and its
	// row: the replacement and the deletion commit inside that window in many rounds.
	mustExec(t, reader, `CREATE FUNCTION slow_incident() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_catalog.pg_sleep(0.02); RETURN NEW; END $$`)
	mustExec(t, reader, `CREATE TRIGGER slow_incident BEFORE INSERT ON incidents FOR EACH ROW EXECUTE FUNCTION slow_incident()`)
	seen := map[string]int{}
	for round := range 30 {
		old := mustUser(t, reader, fmt.Sprintf("old-%d", round), store.RoleMember)
		fresh := mustUser(t, reader, fmt.Sprintf("new-%d", round), store.RoleMember)
		mustAssign(t, reader, store.ScheduleAssignment{UserID: old.ID, Dates: []time.Time{today}, Replace: true})
		var id int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			if round%3 != 2 {
				_, err := admin.AssignSchedule(ctx, store.ScheduleAssignment{UserID: fresh.ID, Dates: []time.Time{today}, Replace: true})
				if err != nil {
					t.Errorf("round %d: replace: %v", round, err)
				}
			}
			if err := admin.DeleteUser(ctx, old.ID); err != nil {
				t.Errorf("round %d: delete the old holder: %v", round, err)
			}
		})
		wg.Go(func() {
			<-start
			res, err := ingester.Ingest(ctx, c, group(fmt.Sprintf("race-%d", round), firing("Race", fmt.Sprintf("r%d", round), t0)))
			if err != nil {
				t.Errorf("round %d: ingest: %v", round, err)
			}
			id = res.IncidentID
		})
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		in := mustIncident(t, reader, id)
		events, err := reader.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var assigned []string
		for _, e := range events {
			if e.Type == store.EventAssigned {
				assigned = append(assigned, e.Username)
			}
		}
		switch {
		case round%3 == 2 && len(assigned) == 0 && in.AssignedToID == nil:
			assigned = []string{"nobody"}
		case len(assigned) != 1:
			t.Fatalf("round %d: assigned events %q, want one", round, assigned)
		case assigned[0] == fresh.Username && (in.AssignedToID == nil || *in.AssignedToID != fresh.ID):
			t.Fatalf("round %d: the event names %s, the incident is assigned to %v", round, fresh.Username, in.AssignedToID)
		case assigned[0] == old.Username && in.AssignedToID != nil:
			t.Fatalf("round %d: given to the deleted %s, still assigned to %d", round, old.Username, *in.AssignedToID)
		case assigned[0] != old.Username && (assigned[0] != fresh.Username || round%3 == 2):
			t.Fatalf("round %d: assigned to %q, want %s or %s", round, assigned[0], old.Username, fresh.Username)
		}
		seen[assigned[0][:3]]++
	}
	t.Logf("incidents given to the old holder: %d, to the new: %d, to nobody: %d", seen["old"], seen["new"], seen["nob"])
}
