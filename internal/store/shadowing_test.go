package store_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// shadows are what a role with CREATE on the server's schema can plant to take over a call the
// server makes (PostgreSQL's CVE-2018-1058): an overload whose types match exactly where
// pg_catalog's candidate is polymorphic or needs a cast, a text overload where the argument
// arrives untyped, and overloads of the functions the store calls with the same name. Each
// records its call in shadow_calls and then answers as the real one would, or as an intruder
// would like (the API-key lookup answers with the first person, an admin).
var shadows = []struct {
	name string
	sql  string
	// control is a statement of the unqualified form that the plant takes over, run by the
	// server's role to prove the plant is live; empty where no form of the server's is taken.
	control string
}{
	{"api_key_owner(text)", ownerShadow("text"), `SELECT * FROM api_key_owner('\x00')`},
	{"api_key_owner(character varying)", ownerShadow("character varying"), ""},
	{"api_key_owner(name)", ownerShadow("name"), ""},
	{"unnest(timestamptz[])", `CREATE FUNCTION public.unnest(a timestamptz[]) RETURNS SETOF timestamptz
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('unnest(timestamptz[])');
		RETURN QUERY SELECT pg_catalog.unnest(a); END $$`, `SELECT unnest(ARRAY[now()])`},
	{"cardinality(timestamptz[])", `CREATE FUNCTION public.cardinality(a timestamptz[]) RETURNS integer
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('cardinality(timestamptz[])');
		RETURN 0; END $$`, `SELECT cardinality(ARRAY[now()])`},
	{"array_position(timestamptz[], timestamptz)", `CREATE FUNCTION public.array_position(a timestamptz[], e timestamptz) RETURNS integer
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('array_position(timestamptz[], timestamptz)');
		RETURN pg_catalog.array_position(a, e); END $$`, `SELECT array_position(ARRAY[now()], now())`},
	{"||(timestamptz[], timestamptz)", `CREATE FUNCTION public.shadow_append(a timestamptz[], e timestamptz) RETURNS timestamptz[]
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('||(timestamptz[], timestamptz)');
		RETURN '{}'; END $$;
		CREATE OPERATOR public.|| (LEFTARG = timestamptz[], RIGHTARG = timestamptz, FUNCTION = public.shadow_append)`,
		`SELECT ARRAY[now()] || now()`},
	{"||(timestamptz[], timestamptz[])", `CREATE FUNCTION public.shadow_concat(a timestamptz[], b timestamptz[]) RETURNS timestamptz[]
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('||(timestamptz[], timestamptz[])');
		RETURN '{}'; END $$;
		CREATE OPERATOR public.|| (LEFTARG = timestamptz[], RIGHTARG = timestamptz[], FUNCTION = public.shadow_concat)`,
		`SELECT ARRAY[now()] || ARRAY[now()]`},
	{"hashtextextended(text, integer)", `CREATE FUNCTION public.hashtextextended(t text, seed integer) RETURNS bigint
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('hashtextextended(text, integer)');
		RETURN 0; END $$`, `SELECT hashtextextended('a', 0)`},
	{"lower(character varying)", `CREATE FUNCTION public.lower(t character varying) RETURNS text
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('lower(character varying)');
		RETURN pg_catalog.lower(t); END $$`, ""},
	{"starts_with(character varying, character varying)", `CREATE FUNCTION public.starts_with(t character varying, p character varying) RETURNS boolean
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('starts_with(character varying, character varying)');
		RETURN true; END $$`, ""},
	{"set_config(text, character varying, boolean)", `CREATE FUNCTION public.set_config(n text, v character varying, l boolean) RETURNS text
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('set_config(text, character varying, boolean)');
		RETURN pg_catalog.set_config(n, v, l); END $$`, ""},
	{"pg_advisory_xact_lock(numeric)", `CREATE FUNCTION public.pg_advisory_xact_lock(k numeric) RETURNS void
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('pg_advisory_xact_lock(numeric)'); END $$`, ""},
	{"current_schema(text)", `CREATE FUNCTION public.current_schema(x text) RETURNS name
		LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.shadow_calls VALUES ('current_schema(text)');
		RETURN 'pg_temp'; END $$`, ""},
}

// ownerShadow is an api_key_owner taking typ that answers any key with the first person.
func ownerShadow(typ string) string {
	return `CREATE FUNCTION public.api_key_owner(secret_hash ` + typ + `)
		RETURNS TABLE (stale BOOLEAN, id BIGINT, username TEXT, email TEXT, role TEXT, kind TEXT,
			oidc_issuer TEXT, oidc_subject TEXT, has_password BOOLEAN, created_at TIMESTAMPTZ)
		LANGUAGE plpgsql AS $$ BEGIN
			INSERT INTO public.shadow_calls VALUES ('api_key_owner(` + typ + `)');
			RETURN QUERY SELECT false, u.id, u.username, u.email, u.role, u.kind, u.oidc_issuer,
				u.oidc_subject, false, u.created_at FROM public.users u ORDER BY u.id LIMIT 1;
		END $$`
}

// TestShadowing: the server, as a role of its own, on a database where another role may create
// in the server's schema (as every role may on PostgreSQL 14 and older), in every statement
// mode: with every overload of shadows planted, each proven able to take over the unqualified
// form, no call of the server's reaches any of them. A random key is refused, a real key
// answers its owner, sign-ins are throttled and counted, an SSO sign-in takes its lock, and
// the start-up check names the intruder.
func TestShadowing(t *testing.T) {
	ctx := context.Background()
	db := mustRoles(t)
	intruder := mustConnect(t, db.intruderURL)
	if _, err := intruder.Exec(ctx, `CREATE TABLE public.shadow_calls (name TEXT NOT NULL);
		GRANT INSERT, SELECT, DELETE ON public.shadow_calls TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	// The function made by the server may not be replaced: the intruder does not own it.
	if _, err := intruder.Exec(ctx, ownerShadow("bytea")); err == nil {
		t.Fatal("the intruder replaced public.api_key_owner(bytea)")
	}
	for _, s := range shadows {
		if _, err := intruder.Exec(ctx, s.sql); err != nil {
			t.Fatalf("plant %s: %v", s.name, err)
		}
	}
	server := mustConnect(t, db.serverURL)
	for _, s := range shadows {
		if s.control == "" {
			continue
		}
		if _, err := server.Exec(ctx, s.control, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("control of %s: %v", s.name, err)
		}
		if got := shadowCalls(t, server); !slices.Equal(got, []string{s.name}) {
			t.Fatalf("the unqualified form %q called %v; want the plant %s (the plant would prove nothing)", s.control, got, s.name)
		}
	}

	forEachStatementMode(t, func(t *testing.T, open opener) {
		st := open(t, db.serverURL)
		suffix := strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:])
		suffix = strings.NewReplacer("=", "-").Replace(suffix)
		alice := mustUser(t, st, "alice-"+suffix, store.RoleMember)
		_, secret := mustKey(t, st, alice.ID)

		random := make([]byte, 32)
		rand.Read(random)
		if u, err := st.AuthenticateAPIKey(ctx, hex.EncodeToString(random)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a random key: got %+v, %v, want ErrNotFound", u, err)
		}
		if u, err := st.AuthenticateAPIKey(ctx, secret); err != nil || u.ID != alice.ID {
			t.Errorf("alice's key: got %+v, %v, want alice", u, err)
		}

		limit := store.RateLimit{Max: 5, Window: time.Minute}
		_, _, a, err := st.UserForSignIn(ctx, alice.Username, store.GateOff, limit)
		if err != nil {
			t.Fatalf("sign-in check: %v", err)
		}
		if err := st.FailedAttempt(ctx, a); err != nil {
			t.Fatalf("count a failed guess: %v", err)
		}
		_, _, a, err = st.UserForSignIn(ctx, alice.Username, store.GateOff, limit)
		if err != nil {
			t.Fatalf("second sign-in check: %v", err)
		}
		if err := st.ReleaseAttempt(ctx, a); err != nil {
			t.Fatalf("release a check: %v", err)
		}
		var attempts, pending int
		if err := st.Pool().QueryRow(ctx, `SELECT pg_catalog.cardinality(attempts), pg_catalog.cardinality(pending)
			FROM login_attempts`).Scan(&attempts, &pending); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || pending != 0 {
			t.Errorf("the throttle's row: %d failed guesses and %d running checks, want 1 and 0", attempts, pending)
		}
		if _, err := st.SignInSSO(ctx, store.SSOIdentity{Issuer: "https://idp.test", Subject: "s-" + suffix,
			Email: "s@example.test", Usernames: []string{"sso-" + suffix}, Role: store.RoleMember}, time.Hour, store.GateOff); err != nil {
			t.Fatalf("SSO sign-in: %v", err)
		}
		e, err := st.SchemaWriters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Schema != "public" || !e.Public || !slices.Contains(e.Creators, db.intruder) || slices.Contains(e.Creators, db.server) {
			t.Errorf("SchemaWriters: got %+v, want schema public, PUBLIC, and the intruder %s among the creators, never the server", e, db.intruder)
		}
		if got := shadowCalls(t, server); len(got) > 0 {
			t.Errorf("the server's statements called the intruder's %v", got)
		}
		if _, err := st.Pool().Exec(ctx, `DELETE FROM login_attempts`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSchemaWriters: a database whose schema only the server may create in exposes nothing;
// one grant of CREATE on it to another role, or of CREATE on the database while the search
// path begins with "$user", and that role is named.
func TestSchemaWriters(t *testing.T) {
	ctx := context.Background()
	db := mustRoles(t)
	admin := mustConnect(t, db.adminURL)
	if _, err := admin.Exec(ctx, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`); err != nil {
		t.Fatal(err)
	}
	st := mustOpen(t, db.serverURL)
	e, err := st.SchemaWriters(ctx)
	if err != nil || e.Exposed() || e.Schema != "public" {
		t.Fatalf("only the server may create: got %+v (%s), %v, want nothing exposed in public", e, e, err)
	}
	if _, err := admin.Exec(ctx, `GRANT CREATE ON DATABASE `+pgx.Identifier{db.name}.Sanitize()+` TO `+pgx.Identifier{db.intruder}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	e, err = st.SchemaWriters(ctx)
	if err != nil || e.Public || len(e.Creators) > 0 || !slices.Equal(e.SchemaMakers, []string{db.intruder}) {
		t.Fatalf("the intruder may create schemas: got %+v, %v, want it among the schema makers alone", e, err)
	}
	if !strings.Contains(e.String(), db.intruder) {
		t.Errorf("String() = %q, want it to name %s", e, db.intruder)
	}
	if _, err := admin.Exec(ctx, `GRANT CREATE ON SCHEMA public TO `+pgx.Identifier{db.intruder}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	e, err = st.SchemaWriters(ctx)
	if err != nil || e.Public || !slices.Equal(e.Creators, []string{db.intruder}) {
		t.Fatalf("the intruder may create in public: got %+v, %v, want it among the creators alone", e, err)
	}
}

// rolesDB is a database owned by a role of the server's own, with another login role beside it.
type rolesDB struct {
	name, server, intruder           string
	adminURL, serverURL, intruderURL string
}

// mustRoles makes a server role, an intruder role, and a database the server owns and has
// migrated, in which (as on PostgreSQL 14 and older) every role may create in the schema
// public; all are dropped when t ends.
func mustRoles(t *testing.T) rolesDB {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	rand.Read(b)
	tag := hex.EncodeToString(b)
	db := rolesDB{name: "shadow_" + tag, server: "srv_" + tag, intruder: "intruder_" + tag}
	admin := mustConnect(t, pgtest.AdminURL())
	const password = "not-a-secret-of-anyone"
	for _, role := range []string{db.server, db.intruder} {
		if _, err := admin.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN PASSWORD '`+password+`'`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db.name}.Sanitize()+` OWNER `+pgx.Identifier{db.server}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		admin := mustConnect(t, pgtest.AdminURL())
		for _, sql := range []string{`DROP DATABASE IF EXISTS ` + pgx.Identifier{db.name}.Sanitize() + ` WITH (FORCE)`,
			`DROP ROLE IF EXISTS ` + pgx.Identifier{db.server}.Sanitize(), `DROP ROLE IF EXISTS ` + pgx.Identifier{db.intruder}.Sanitize()} {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Errorf("clean up: %s: %v", sql, err)
			}
		}
	})
	base, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	as := func(user string) string {
		u := *base
		u.Path = "/" + db.name
		if user != "" {
			u.User = url.UserPassword(user, password)
		}
		return u.String()
	}
	db.adminURL, db.serverURL, db.intruderURL = as(""), as(db.server), as(db.intruder)
	admin = mustConnect(t, db.adminURL)
	if _, err := admin.Exec(ctx, `GRANT CREATE ON SCHEMA public TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	if err := store.MigrateUp(ctx, db.serverURL); err != nil {
		t.Fatalf("migrate as the server's role: %v", err)
	}
	return db
}

// mustConnect opens one connection, closed when t ends.
func mustConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// shadowCalls returns and forgets the calls the plants recorded.
func shadowCalls(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `DELETE FROM public.shadow_calls RETURNING name`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// TestPinnedSearchPath: the functions the server made find their tables in their own schema
// whatever the caller's search_path: a temporary table api_keys, which Postgres would search
// before public for an unpinned function, answers nothing through api_key_owner, and a
// temporary bootstrap_state does not open the gate of older replicas.
func TestPinnedSearchPath(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	planted := sha256.Sum256([]byte("planted"))
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE api_keys (LIKE public.api_keys) ON COMMIT DROP;
		CREATE TEMP TABLE bootstrap_state (state TEXT) ON COMMIT DROP;
		INSERT INTO pg_temp.bootstrap_state VALUES ('complete')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO pg_temp.api_keys (id, user_id, name, key_hash, created_at)
		VALUES (1, $1, 'planted', $2, now())`, alice.ID, planted[:]); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+store.APIKeyOwnerSQL[len("SELECT * FROM "):],
		planted[:]).Scan(&n); err != nil || n != 0 {
		t.Errorf("api_key_owner with a temporary api_keys: %d rows, %v; want none", n, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO users (username, email) VALUES ('mallory', 'm@example.test')`); err == nil {
		t.Fatal("an ungated insert went through with a temporary bootstrap_state saying complete")
	}
}
