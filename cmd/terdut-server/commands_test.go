package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/migrations"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// migrationCount is how many migrations this binary ships.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("list migrations: got %d files, %v; want some", len(files), err)
	}
	return len(files)
}

// mustQuery runs a query on the database at url and returns every row as strings.
func mustQuery(t *testing.T, url, sql string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(vals), "["), "]"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func TestMigrate(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := pgtest.MustEmptyDatabase(t)
		r := mustRun(t, env{"TERDUT_DATABASE_URL": db}, "migrate")
		if want := fmt.Sprintf("applied %d migrations; the schema is current\n", migrationCount(t)); r.Stdout != want {
			t.Errorf("first migrate: got %q, want %q", r.Stdout, want)
		}
		if got := mustQuery(t, db, "SELECT state, generation FROM bootstrap_state"); len(got) != 1 || got[0] != "pending 0" {
			t.Errorf("bootstrap_state: got %q, want [pending 0]", got)
		}
		r = mustRun(t, env{}, "migrate", "--database-url", db)
		if want := "applied 0 migrations; the schema is current\n"; r.Stdout != want {
			t.Errorf("second migrate: got %q, want %q", r.Stdout, want)
		}
	})
	t.Run("DatabaseURLFile", func(t *testing.T) {
		db := pgtest.MustEmptyDatabase(t)
		r := mustRun(t, env{"TERDUT_DATABASE_URL_FILE": mustFile(t, "database-url", db+"\n")}, "migrate")
		mustContain(t, "stdout", r.Stdout, fmt.Sprintf("applied %d migrations", migrationCount(t)))
	})
	t.Run("ErrArgument", func(t *testing.T) {
		r := runCmd(t, env{"TERDUT_DATABASE_URL": testDB}, "migrate", "now")
		if r.Err == nil || !strings.Contains(r.Err.Error(), `migrate takes no arguments, got "now"`) {
			t.Errorf("got %v, want a no arguments error", r.Err)
		}
	})
	t.Run("ErrNoDatabase", func(t *testing.T) {
		r := runCmd(t, env{}, "migrate")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "no database: set --database-url, TERDUT_DATABASE_URL or TERDUT_DATABASE_URL_FILE") {
			t.Errorf("got %v, want a no database error", r.Err)
		}
	})
}

// claimOutput is what `bootstrap claim` prints.
type claimOutput struct {
	Generation int64  `json:"generation"`
	UserID     int64  `json:"user_id"`
	Username   string `json:"username"`
	APIKeyID   int64  `json:"api_key_id"`
	APIKey     string `json:"api_key"`
}

// statusOutput is what `bootstrap status` prints.
type statusOutput struct {
	State       string  `json:"state"`
	Generation  int64   `json:"generation"`
	LastClaimAt *string `json:"last_claim_at"`
	LastResetAt *string `json:"last_reset_at"`
	RecentAudit []struct {
		At         string `json:"at"`
		Action     string `json:"action"`
		Actor      string `json:"actor"`
		RemoteAddr string `json:"remote_addr"`
		Generation int64  `json:"generation"`
		State      string `json:"state"`
		Detail     string `json:"detail"`
	} `json:"recent_audit"`
}

// resetOutput is what `bootstrap reset` prints.
type resetOutput struct {
	State           string `json:"state"`
	Generation      int64  `json:"generation"`
	RevokedAPIKeys  int64  `json:"revoked_api_keys"`
	RevokedSessions int64  `json:"revoked_sessions"`
}

func decodeStrict(t *testing.T, what, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decode %q: %v", what, s, err)
	}
}

func mustStatusCmd(t *testing.T, e env, wantState string, wantGen int64) statusOutput {
	t.Helper()
	var st statusOutput
	decodeStrict(t, "bootstrap status", mustRun(t, e, "bootstrap", "status").Stdout, &st)
	if st.State != wantState || st.Generation != wantGen {
		t.Fatalf("bootstrap status: got %s generation %d, want %s generation %d", st.State, st.Generation, wantState, wantGen)
	}
	return st
}

var apiKeyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestBootstrapCLI walks one install through the CLI: status, claim, a refused second
// claim, reset, an idempotent reset and a new claim, against a database it migrates itself.
func TestBootstrapCLI(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	e := env{"TERDUT_DATABASE_URL": db}

	st := mustStatusCmd(t, e, "pending", 0)
	if st.LastClaimAt != nil || st.LastResetAt != nil {
		t.Errorf("status of a new install: got last claim %v, last reset %v, want neither", st.LastClaimAt, st.LastResetAt)
	}

	r := mustRun(t, e, "bootstrap", "claim")
	var first claimOutput
	decodeStrict(t, "bootstrap claim", r.Stdout, &first)
	if first.Generation != 1 || first.Username != "terdut-operator-bootstrap" || !apiKeyPattern.MatchString(first.APIKey) {
		t.Fatalf("claim: got %+v, want generation 1, user terdut-operator-bootstrap and a 64-hex key", first)
	}
	if n := strings.Count(r.Stdout+r.Stderr, first.APIKey); n != 1 {
		t.Errorf("claim: the key appears %d times in the output, want once", n)
	}
	mustContain(t, "claim stderr", r.Stderr, "shown once")
	if u, err := apitest.OpenStore(t, db).AuthenticateAPIKey(context.Background(), first.APIKey); err != nil || u.ID != first.UserID {
		t.Errorf("authenticate the claimed key: got user %d, %v; want user %d", u.ID, err, first.UserID)
	}
	st = mustStatusCmd(t, e, "complete", 1)
	if st.LastClaimAt == nil {
		t.Errorf("status after the claim: got no last_claim_at, want one")
	}

	t.Run("ErrAlreadyClaimed", func(t *testing.T) {
		r := runCmd(t, e, "bootstrap", "claim")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "already claimed") || !strings.Contains(r.Err.Error(), "terdut-server bootstrap reset") {
			t.Errorf("second claim: got %v, want an error saying it is already claimed and how to reopen it", r.Err)
		}
		if r.Stdout != "" {
			t.Errorf("second claim: got stdout %q, want nothing", r.Stdout)
		}
		mustStatusCmd(t, e, "complete", 1)
	})

	var reset resetOutput
	decodeStrict(t, "bootstrap reset", mustRun(t, e, "bootstrap", "reset").Stdout, &reset)
	if want := (resetOutput{State: "pending", Generation: 1, RevokedAPIKeys: 1}); reset != want {
		t.Errorf("reset: got %+v, want %+v", reset, want)
	}
	st = mustStatusCmd(t, e, "pending", 1)
	if st.LastResetAt == nil {
		t.Errorf("status after the reset: got no last_reset_at, want one")
	}
	if _, err := apitest.OpenStore(t, db).AuthenticateAPIKey(context.Background(), first.APIKey); err == nil {
		t.Errorf("authenticate the key after the reset: got no error, want it revoked")
	}

	decodeStrict(t, "second reset", mustRun(t, e, "bootstrap", "reset").Stdout, &reset)
	if want := (resetOutput{State: "pending", Generation: 1}); reset != want {
		t.Errorf("second reset: got %+v, want %+v", reset, want)
	}

	var second claimOutput
	decodeStrict(t, "claim after reset", mustRun(t, e, "bootstrap", "claim").Stdout, &second)
	if second.Generation != 2 || second.UserID != first.UserID || second.APIKey == first.APIKey {
		t.Errorf("claim after reset: got %+v, want generation 2, the same principal (%d) and a new key", second, first.UserID)
	}
	final := mustStatusCmd(t, e, "complete", 2)
	var shown []string
	for _, a := range final.RecentAudit {
		shown = append(shown, fmt.Sprintf("%s %s %d %s", a.Action, a.Actor, a.Generation, a.State))
	}

	want := []string{"backfill migration 0 pending", "claim cli 1 complete", "reset cli 1 pending",
		"reset cli 1 pending", "claim cli 2 complete"}
	got := mustQuery(t, db, "SELECT action, actor, generation, state FROM bootstrap_audit ORDER BY id")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Join(shown, "\n") != strings.Join(want, "\n") {
		t.Errorf("bootstrap status's recent_audit: got\n%s\nwant\n%s", strings.Join(shown, "\n"), strings.Join(want, "\n"))
	}
}

func TestBootstrapCLI_Errors(t *testing.T) {
	// Nothing listens there: a command that reached for the database would fail differently.
	unreachable := env{"TERDUT_DATABASE_URL": "postgres://terdut:" + secretPassword + "@127.0.0.1:1/terdut?sslmode=disable"}
	tests := []struct {
		name string
		env  env
		args []string
		want string
	}{
		{name: "ErrNoCommand", env: unreachable, args: []string{"bootstrap"}, want: "usage: terdut-server bootstrap status|claim|reset"},
		{name: "ErrUnknownCommand", env: unreachable, args: []string{"bootstrap", "steal"}, want: `unknown bootstrap command "steal": use status, claim or reset`},
		{name: "ErrArgument", env: unreachable, args: []string{"bootstrap", "status", "now"}, want: `bootstrap status takes no arguments, got "now"`},
		{name: "ErrNoDatabase", env: env{}, args: []string{"bootstrap", "claim"}, want: "no database"},
		{name: "ErrDatabaseUnreachable", env: unreachable, args: []string{"bootstrap", "reset"}, want: "database unavailable"},
		{name: "ErrDatabaseURLMalformed", args: []string{"bootstrap", "claim", "--database-url", "postgres://terdut:" + secretPassword + "@[::1/terdut"},
			want: "database URL: the URL is malformed"},
		{name: "ErrMigrateHostsWithoutTarget", args: []string{"migrate", "--database-url", "postgres://terdut:" + secretPassword + "@127.0.0.1:1,127.0.0.1:2/terdut"},
			want: "--database-url: the database URL lists 2 hosts but not target_session_attrs=read-write"},
		{name: "ErrMigrateDatabaseURLMalformed", args: []string{"migrate", "--database-url", "postgres://terdut:" + secretPassword + "@[::1/terdut"},
			want: "database URL: the URL is malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCmd(t, tt.env, tt.args...)
			if r.Err == nil || !strings.Contains(r.Err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", r.Err, tt.want)
			}
			for _, out := range []string{r.Err.Error(), r.Stdout, r.Stderr} {
				mustNotContain(t, "error and output", out, secretPassword)
			}
		})
	}
}
