package store_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/migrations"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// latestVersion is how many migrations this binary ships.
var latestVersion = func() int {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		panic(err)
	}
	return len(files)
}()

// mustGoose returns a goose provider over the shipped migrations for the database at url,
// for stepping the schema up and down one version at a time.
func mustGoose(tb testing.TB, url string) *goose.Provider {
	tb.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithLogger(goose.NopLogger()))
	if err != nil {
		tb.Fatalf("load migrations: %v", err)
	}
	return p
}

// mustMigrateTo applies the migrations up to and including version.
func mustMigrateTo(tb testing.TB, p *goose.Provider, version int64) {
	tb.Helper()
	if _, err := p.UpTo(context.Background(), version); err != nil {
		tb.Fatalf("migrate up to %d: %v", version, err)
	}
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		url := pgtest.MustEmptyDatabase(t)
		n, err := store.Migrate(ctx, url)
		if err != nil || n != latestVersion {
			t.Fatalf("Migrate on an empty database: got %d, %v, want %d, nil", n, err, latestVersion)
		}
		st := mustOpen(t, url)
		if err := st.CheckSchema(ctx); err != nil {
			t.Fatalf("CheckSchema after Migrate: got %v, want nil", err)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StatePending || b.Generation != 0 || b.PrincipalID != nil {
			t.Fatalf("bootstrap state of a new install: got %+v, want pending, generation 0, no principal", b)
		}
		n, err = store.Migrate(ctx, url)
		if err != nil || n != 0 {
			t.Fatalf("Migrate again: got %d, %v, want 0, nil", n, err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// Replicas starting at once all call Migrate; goose's session lock serializes them.
		url := pgtest.MustEmptyDatabase(t)
		const replicas = 4
		applied := make([]int, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Go(func() { applied[i], errs[i] = store.Migrate(ctx, url) })
		}
		wg.Wait()
		total := 0
		for i := range replicas {
			if errs[i] != nil {
				t.Errorf("replica %d: got %v, want nil", i, errs[i])
			}
			total += applied[i]
		}
		if total != latestVersion {
			t.Fatalf("migrations applied across replicas: got %d, want %d", total, latestVersion)
		}
		st := mustOpen(t, url)
		if n := mustCount(t, st, `SELECT count(*) FROM bootstrap_state`); n != 1 {
			t.Fatalf("bootstrap_state rows: got %d, want 1", n)
		}
	})

	t.Run("DownAndUp", func(t *testing.T) {
		url := pgtest.MustDatabase(t)
		p := mustGoose(t, url)
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Fatalf("migrate down to 0: got %v, want nil", err)
		}
		st := mustOpen(t, url)
		var tables int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
			WHERE table_schema = 'public' AND table_name NOT IN ('goose_db_version', 'goose_lock')`).Scan(&tables); err != nil {
			t.Fatal(err)
		}
		if tables != 0 {
			t.Fatalf("tables left after migrating down: got %d, want 0", tables)
		}
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
			t.Fatalf("CheckSchema after down: got %v, want %v", err, store.ErrSchemaOutdated)
		}
		n, err := store.Migrate(ctx, url)
		if err != nil || n != latestVersion {
			t.Fatalf("Migrate after down: got %d, %v, want %d, nil", n, err, latestVersion)
		}
		if err := st.CheckSchema(ctx); err != nil {
			t.Fatalf("CheckSchema after up again: got %v, want nil", err)
		}
		// The schema works: a claim goes through.
		mustClaim(t, st)
	})
}

func TestCheckSchema(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		if err := st.CheckSchema(ctx); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	})

	t.Run("ErrSchemaOutdated", func(t *testing.T) {
		url := pgtest.MustEmptyDatabase(t)
		mustMigrateTo(t, mustGoose(t, url), 1)
		st := mustOpen(t, url)
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
			t.Fatalf("got %v, want %v", err, store.ErrSchemaOutdated)
		}
	})

	t.Run("ErrSchemaOutdated_EmptyDatabase", func(t *testing.T) {
		st := mustOpen(t, pgtest.MustEmptyDatabase(t))
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaOutdated) {
			t.Fatalf("got %v, want %v", err, store.ErrSchemaOutdated)
		}
		// It backs /readyz, so it only reads: it must not create goose's table.
		if n := mustCount(t, st, `SELECT count(*) FROM pg_tables WHERE tablename = 'goose_db_version'`); n != 0 {
			t.Fatalf("goose_db_version after CheckSchema: got %d tables, want 0", n)
		}
	})

	t.Run("ErrSchemaTooNew", func(t *testing.T) {
		st := mustStore(t)
		// A version past any this binary ships (the numbers may have gaps: each branch takes its own).
		mustExec(t, st, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, int64(1)<<40)
		if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaTooNew) {
			t.Fatalf("got %v, want %v", err, store.ErrSchemaTooNew)
		}
	})
}

func TestMigrate_Backfill(t *testing.T) {
	ctx := context.Background()

	// upgrade creates a database at the schema before the claim state existed, lets seed fill
	// it as an old install would have, then applies the rest of the migrations.
	upgrade := func(t *testing.T, seed ...string) *store.Store {
		t.Helper()
		url := pgtest.MustEmptyDatabase(t)
		mustMigrateTo(t, mustGoose(t, url), 1)
		st := mustOpen(t, url)
		for _, sql := range seed {
			mustExec(t, st, sql)
		}
		if _, err := store.Migrate(ctx, url); err != nil {
			t.Fatalf("migrate: got %v, want nil", err)
		}
		return st
	}
	backfillAudit := func(t *testing.T, st *store.Store) store.AuditEntry {
		t.Helper()
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 1 || audit[0].Action != "backfill" || audit[0].Actor != store.ActorMigration {
			t.Fatalf("audit after upgrade: got %+v, want one backfill row by the migration", audit)
		}
		return audit[0]
	}

	t.Run("NoUsers", func(t *testing.T) {
		st := upgrade(t)
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StatePending || b.Generation != 0 || b.PrincipalID != nil {
			t.Fatalf("got %+v, want pending, generation 0, no principal", b)
		}
		if a := backfillAudit(t, st); a.State != store.StatePending || a.Generation != 0 {
			t.Fatalf("audit row: got %+v, want state pending, generation 0", a)
		}
	})

	t.Run("UsersPresent", func(t *testing.T) {
		st := upgrade(t, `INSERT INTO users (username, email) VALUES ('alice', 'alice@example.test')`)
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StateComplete || b.Generation != 1 || b.PrincipalID != nil || b.LastClaimAt == nil {
			t.Fatalf("got %+v, want complete, generation 1, no principal, a claim time", b)
		}
		if a := backfillAudit(t, st); a.State != store.StateComplete || a.Generation != 1 {
			t.Fatalf("audit row: got %+v, want state complete, generation 1", a)
		}
		// The claim is taken: a second one is refused, as under the old rule.
		if _, err := st.Claim(ctx, store.AuditInfo{Actor: store.ActorOperator}); !errors.Is(err, store.ErrAlreadyClaimed) {
			t.Fatalf("claim after upgrade: got %v, want %v", err, store.ErrAlreadyClaimed)
		}
	})

	t.Run("OldPrincipalAdopted", func(t *testing.T) {
		st := upgrade(t,
			`INSERT INTO users (username, email, role, kind)
			 VALUES ('alice', 'alice@example.test', 'member', 'human'),
			        ('terdut-operator-bootstrap', 'bootstrap@terdut-operator.local', 'admin', 'service')`,
			`INSERT INTO api_keys (user_id, name, key_hash)
			 SELECT id, 'bootstrap', sha256('old-key') FROM users WHERE username = 'terdut-operator-bootstrap'`)
		var principalID int64
		if err := st.Pool().QueryRow(ctx, `SELECT id FROM users WHERE username = 'terdut-operator-bootstrap'`).
			Scan(&principalID); err != nil {
			t.Fatal(err)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StateComplete || b.PrincipalID == nil || *b.PrincipalID != principalID {
			t.Fatalf("got %+v, want complete with principal %d", b, principalID)
		}
		backfillAudit(t, st)
		// Adoption is what lets a reset disarm the old principal's key.
		res, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{})
		if err != nil || res.RevokedAPIKeys != 1 {
			t.Fatalf("reset: got %+v, %v, want 1 revoked key", res, err)
		}
		again := mustClaim(t, st)
		if again.Principal.ID != principalID || again.Generation != 2 {
			t.Fatalf("claim after reset: got principal %d generation %d, want %d and 2",
				again.Principal.ID, again.Generation, principalID)
		}
	})

	t.Run("EmptySubjectDisarmed", func(t *testing.T) {
		// Sign-ins without a subject made one shared account; the upgrade disarms it and puts it
		// out of any sign-in's reach, and leaves everyone else alone.
		st := upgrade(t,
			`INSERT INTO users (username, role, oidc_issuer, oidc_subject)
			 VALUES ('shared', 'admin', 'https://idp.example.test', ''),
			        ('ada', 'admin', 'https://idp.example.test', 'sub-ada')`,
			`INSERT INTO api_keys (user_id, name, key_hash) SELECT id, 'k', sha256(username::bytea) FROM users`,
			`INSERT INTO sessions (user_id, token_hash, expires_at)
			 SELECT id, sha256(('s' || username)::bytea), now() + interval '1 hour' FROM users`)
		var role, subject string
		if err := st.Pool().QueryRow(ctx, `SELECT role, oidc_subject FROM users WHERE username = 'shared'`).Scan(&role, &subject); err != nil {
			t.Fatal(err)
		}
		if role != "member" || len(subject) <= 255 {
			t.Errorf("the shared account: got role %s and a subject of %d characters, want a member and over 255", role, len(subject))
		}
		for _, q := range []string{
			`SELECT count(*) FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.revoked_at IS NULL AND u.username = $1`,
			`SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.revoked_at IS NULL AND u.username = $1`,
		} {
			if n := mustCount(t, st, q, "shared"); n != 0 {
				t.Errorf("%s for the shared account: got %d, want 0", q, n)
			}
			if n := mustCount(t, st, q, "ada"); n != 1 {
				t.Errorf("%s for ada: got %d, want 1", q, n)
			}
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users WHERE username = 'ada' AND role = 'admin'`); n != 1 {
			t.Errorf("ada: got %d admins, want 1", n)
		}
	})

	t.Run("HumanNamedLikePrincipalNotAdopted", func(t *testing.T) {
		st := upgrade(t, `INSERT INTO users (username, email, role, kind, password_hash)
			VALUES ('terdut-operator-bootstrap', 'someone@example.test', 'member', 'human', 'x')`)
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StateComplete || b.PrincipalID != nil {
			t.Fatalf("got %+v, want complete with no principal", b)
		}
		// A claim never hands a person's account to the operator.
		if _, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Claim(ctx, store.AuditInfo{Actor: store.ActorCLI}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("claim: got %v, want %v", err, store.ErrConflict)
		}
		var role, kind string
		if err := st.Pool().QueryRow(ctx, `SELECT role, kind FROM users WHERE username = 'terdut-operator-bootstrap'`).
			Scan(&role, &kind); err != nil {
			t.Fatal(err)
		}
		if role != "member" || kind != "human" {
			t.Fatalf("the person's account: got role %s kind %s, want member human", role, kind)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys`); n != 0 {
			t.Fatalf("API keys after the refused claim: got %d, want 0", n)
		}
	})
}

func TestSchema_Constraints(t *testing.T) {
	ctx := context.Background()

	t.Run("BootstrapStateOneRow", func(t *testing.T) {
		st := mustStore(t)
		for _, sql := range []string{
			`INSERT INTO bootstrap_state (state) VALUES ('pending')`,
			`INSERT INTO bootstrap_state (id, state) VALUES (false, 'pending')`,
		} {
			if _, err := st.Pool().Exec(ctx, sql); err == nil {
				t.Errorf("%s: got nil, want an error", sql)
			}
		}
		if n := mustCount(t, st, `SELECT count(*) FROM bootstrap_state`); n != 1 {
			t.Fatalf("rows: got %d, want 1", n)
		}
	})

	t.Run("SSOIdentityNotEmpty", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		for _, sql := range []string{
			`INSERT INTO users (username, oidc_issuer, oidc_subject) VALUES ('a', 'https://idp.example.test', '')`,
			`INSERT INTO users (username, oidc_issuer, oidc_subject) VALUES ('b', '', 'sub-b')`,
		} {
			if _, err := st.Pool().Exec(ctx, sql); err == nil {
				t.Errorf("%s: got nil, want an error", sql)
			}
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users WHERE oidc_issuer IS NOT NULL`); n != 0 {
			t.Fatalf("single sign-on users: got %d, want 0", n)
		}
	})

	t.Run("BootstrapAuditAppendOnly", func(t *testing.T) {
		st := mustStore(t)
		for _, sql := range []string{
			`UPDATE bootstrap_audit SET detail = 'rewritten'`,
			`DELETE FROM bootstrap_audit`,
			`TRUNCATE bootstrap_audit`,
		} {
			if _, err := st.Pool().Exec(ctx, sql); err == nil {
				t.Errorf("%s: got nil, want an error", sql)
			}
		}
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 1 || audit[0].Detail != "no users at upgrade" {
			t.Fatalf("audit: got %+v, want the one backfill row untouched", audit)
		}
	})
}
