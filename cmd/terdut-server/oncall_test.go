package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_AssignOnCall: a new incident goes to the person on call today, unless
// --assign-on-call (TERDUT_ASSIGN_ON_CALL) is false.
func TestServe_AssignOnCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      env
		assigned bool
	}{
		{"Default", env{}, true},
		{"Off", env{"TERDUT_ASSIGN_ON_CALL": "false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := pgtest.MustDatabase(t)
			tc.env["TERDUT_DATABASE_URL"] = dbURL
			srv := startServe(t, tc.env)
			ctx := context.Background()
			st, err := store.Open(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			alice, err := st.CreateUser(ctx, store.NewUser{Username: "alice", Email: "alice@example.test", Role: store.RoleMember})
			if err != nil {
				t.Fatal(err)
			}
			var today time.Time
			if err := st.Pool().QueryRow(ctx, `SELECT (now() AT TIME ZONE 'UTC')::date`).Scan(&today); err != nil {
				t.Fatal(err)
			}
			if _, err := st.AssignSchedule(ctx, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{today}}); err != nil {
				t.Fatal(err)
			}
			_, key, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod"})
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/webhooks/alertmanager", bytes.NewReader(firingNotification()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var stored struct {
				IncidentID int64 `json:"incident_id"`
			}
			err = json.NewDecoder(resp.Body).Decode(&stored)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil {
				t.Fatalf("POST the webhook: got %d (%v), want 200", resp.StatusCode, err)
			}
			in, err := st.Incident(ctx, stored.IncidentID)
			if err != nil {
				t.Fatal(err)
			}
			if got := in.AssignedToID != nil && *in.AssignedToID == alice.ID; got != tc.assigned {
				t.Fatalf("incident assigned to %q, want assigned to alice: %v", in.AssignedTo, tc.assigned)
			}
		})
	}
}
