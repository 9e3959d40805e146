package main

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

type auditOutput struct {
	Events []struct {
		ID         int64
		Event      string
		ActorKind  string `json:"actor_kind"`
		ActorID    *int64 `json:"actor_id"`
		ActorName  string `json:"actor_name"`
		TargetID   *int64 `json:"target_id"`
		TargetName string `json:"target_name"`
		RemoteAddr string `json:"remote_addr"`
		RequestID  string `json:"request_id"`
		Detail     string
		At         time.Time
		// Added by issue 22 item 8: the client's X-Request-Id, beside the server's id.
		ClientRequestID string `json:"client_request_id"`
	}
	NextBefore *int64 `json:"next_before"`
}

func (o auditOutput) names() []string {
	var out []string
	for _, e := range o.Events {
		out = append(out, e.Event)
	}
	return out
}

// TestAuditCLI: `terdut-server audit` prints the audit newest first, with the filters and
// pages of GET /api/audit: a claim and reset at the shell beside what the principal did.
func TestAuditCLI(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	e := env{"TERDUT_DATABASE_URL": db}
	var claim claimOutput
	decodeStrict(t, "bootstrap claim", mustRun(t, e, "bootstrap", "claim").Stdout, &claim)
	st := apitest.OpenStore(t, db)
	if err := st.AppendEvent(context.Background(), store.Event{Event: "user.created", ActorKind: store.ActorKindUser,
		ActorID: claim.UserID, ActorName: claim.Username, TargetID: 99, TargetName: "zoe"}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, e, "bootstrap", "reset")

	var all auditOutput
	decodeStrict(t, "audit", mustRun(t, e, "audit").Stdout, &all)
	if want := []string{"bootstrap.reset", "user.created", "bootstrap.claim", "bootstrap.backfill"}; !slices.Equal(all.names(), want) {
		t.Fatalf("audit: got %v, want %v", all.names(), want)
	}
	if c := all.Events[2]; c.ActorKind != "cli" || c.RemoteAddr != "local" || c.TargetID == nil || *c.TargetID != claim.UserID {
		t.Errorf("the claim: got %+v, want the cli, from local, claiming user %d", c, claim.UserID)
	}
	for args, want := range map[string][]string{
		"event=bootstrap.*":           {"bootstrap.reset", "bootstrap.claim", "bootstrap.backfill"},
		"actor=cli":                   {"bootstrap.reset", "bootstrap.claim"},
		"actor=" + itoa(claim.UserID): {"user.created"},
		"limit=2":                     {"bootstrap.reset", "user.created"},
		"limit=2 before=" + itoa(all.Events[1].ID): {"bootstrap.claim", "bootstrap.backfill"},
	} {
		var got auditOutput
		decodeStrict(t, "audit "+args, mustRun(t, e, append([]string{"audit"}, strings.Fields(args)...)...).Stdout, &got)
		if !slices.Equal(got.names(), want) {
			t.Errorf("audit %s: got %v, want %v", args, got.names(), want)
		}
		// A page is the last when no event is older than its own: limit=2 has one, the
		// page before the backfill none, full as it is.
		last := strings.Contains(args, "before=") || !strings.Contains(args, "limit=")
		if next := got.NextBefore; (next == nil) != last || (next != nil && *next != got.Events[len(got.Events)-1].ID) {
			t.Errorf("audit %s: got next_before %v, want it %s", args, next, map[bool]string{true: "null", false: "the last event's id"}[last])
		}
	}
	for args, want := range map[string]string{"frobnicate": "not a filter", "limit=0": "limit must be", "actor=nobody": "actor must be"} {
		if r := runCmd(t, e, "audit", args); r.Err == nil || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("audit %s: got %v, want an error saying %q", args, r.Err, want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestSweepAudit: housekeeping deletes the audit events older than --audit-retention and no others.
func TestSweepAudit(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	e := env{"TERDUT_DATABASE_URL": db}
	mustRun(t, e, "bootstrap", "claim")
	// The claim and the migration's backfill become two years old (as the table's owner, with
	// its triggers off: nothing else can backdate a row).
	mustQuery(t, db, `ALTER TABLE audit_events DISABLE TRIGGER USER`)
	mustQuery(t, db, `UPDATE audit_events SET at = now() - interval '730 days'`)
	mustQuery(t, db, `ALTER TABLE audit_events ENABLE TRIGGER USER`)
	mustRun(t, e, "bootstrap", "reset")

	st := apitest.OpenStore(t, db)
	var logs strings.Builder
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	sweepAudit(context.Background(), st, 0, log)
	if got := mustQuery(t, db, `SELECT count(*) FROM audit_events`); got[0] != "3" {
		t.Fatalf("after a sweep with retention 0: got %v events, want all 3 kept", got)
	}
	sweepAudit(context.Background(), st, 8760*time.Hour, log)
	if got := mustQuery(t, db, `SELECT event FROM audit_events`); !slices.Equal(got, []string{"bootstrap.reset"}) {
		t.Fatalf("after a sweep with retention 8760h: got %v, want only the recent reset", got)
	}
	mustContain(t, "log", logs.String(), "deleted audit events older than --audit-retention", `"audit_events":2`)
	mustNotContain(t, "log", logs.String(), "failed")
}
