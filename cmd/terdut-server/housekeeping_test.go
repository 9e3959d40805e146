package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// markedFixture starts a WITH whose inserts into users select FROM marked: it marks the
// statement's transaction as this version's, which decides the gate itself (migration 00010),
// so that the fixture can add people while the install is pending.
const markedFixture = `WITH marked AS (SELECT set_config('terdut.gate', 'checked', true)), `

// TestServe_Housekeeping: a running server sweeps dead sessions and an expired set-password
// link on its schedule, brings the keys of single sign-on people within --sso-api-key-max-ttl,
// and stops doing so cleanly.
func TestServe_Housekeeping(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	srv := startServe(t, env{"TERDUT_DATABASE_URL": db}, "--sweep-interval", "1s", "--sso-api-key-max-ttl", "24h")

	mustQuery(t, db, markedFixture+`pw AS (INSERT INTO users (username) SELECT 'alice' FROM marked RETURNING id),
		sso AS (INSERT INTO users (username, oidc_issuer, oidc_subject) SELECT 'sam', 'https://idp.test', 'sam' FROM marked RETURNING id),
		s AS (INSERT INTO sessions (user_id, token_hash, expires_at, revoked_at)
			SELECT pw.id, sha256(v.tag::bytea), v.expires, v.revoked FROM pw, (VALUES
				('live', now() + interval '1 hour', NULL::timestamptz),
				('revoked', now() + interval '1 hour', now()),
				('expired', now() - interval '1 second', NULL)) v(tag, expires, revoked)),
		k AS (INSERT INTO api_keys (user_id, name, key_hash) SELECT pw.id, 'pw', sha256('pw'::bytea) FROM pw),
		l AS (INSERT INTO password_links (user_id, token_hash, expires_at) SELECT pw.id, sha256('link'::bytea), now() - interval '1 second' FROM pw)
		INSERT INTO api_keys (user_id, name, key_hash) SELECT sso.id, 'sso', sha256('sso'::bytea) FROM sso`)
	// A person whose last single sign-on was 30 hours ago: the cap counts from it, not from now.
	mustQuery(t, db, markedFixture+`u AS (INSERT INTO users (username, oidc_issuer, oidc_subject, last_sso_at)
		SELECT 'gone', 'https://idp.test', 'gone', now() - interval '30 hours' FROM marked RETURNING id)
		INSERT INTO api_keys (user_id, name, key_hash) SELECT u.id, 'gone', sha256('gone'::bytea) FROM u`)

	deadline := time.Now().Add(startTimeout)
	for {
		got := mustQuery(t, db, `SELECT
			(SELECT count(*) FROM sessions WHERE revoked_at IS NOT NULL OR expires_at <= now()),
			(SELECT count(*) FROM sessions),
			(SELECT count(*) FROM api_keys WHERE name = 'sso' AND expires_at BETWEEN now() + interval '23 hours' AND now() + interval '24 hours'),
			(SELECT count(*) FROM api_keys WHERE name = 'pw' AND expires_at IS NULL),
			(SELECT count(*) FROM api_keys WHERE name = 'gone' AND expires_at <= now() - interval '5 hours'),
			(SELECT count(*) FROM password_links)`)
		if len(got) == 1 && got[0] == "0 1 1 1 1 0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead sessions, sessions, capped SSO keys, uncapped password keys, keys capped at an old sign-in, "+
				"set-password links: got %v, want [0 1 1 1 1 0] within %s; stderr:\n%s",
				got, startTimeout, srv.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The server sweeps from its start, so a round may begin before the fixture commits and
	// see part of it (the revoked session's statement before, the expired one's after): what
	// the rounds swept is counted over all of them.
	if sessions, links := sweptInLog(srv.Stderr.String()); sessions != 2 || links != 1 {
		t.Errorf("swept over the rounds: %d sessions and %d set-password links, want 2 and 1; stderr:\n%s", sessions, links, srv.Stderr)
	}
	mustContain(t, "stderr", srv.Stderr.String(),
		"housekeeping: API keys of single sign-on people now expire within --sso-api-key-max-ttl")
	mustNotContain(t, "stderr", srv.Stderr.String(), "housekeeping: sweep failed", "capping the API keys of single sign-on people failed")
}

// sweptInLog sums the sessions and set-password links of every "swept dead rows" line of a
// server's JSON log.
func sweptInLog(log string) (sessions, links int64) {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg           string `json:"msg"`
			Sessions      int64  `json:"sessions"`
			PasswordLinks int64  `json:"password_links"`
		}
		if line == "" || json.Unmarshal([]byte(line), &l) != nil || l.Msg != "housekeeping: swept dead rows" {
			continue
		}
		sessions += l.Sessions
		links += l.PasswordLinks
	}
	return sessions, links
}

// TestHousekeep_CapFailureStillSweeps: when capping single sign-on people's keys fails (here a
// trigger refuses the update), the round still sweeps, and logs the failure.
func TestHousekeep_CapFailureStillSweeps(t *testing.T) {
	db := pgtest.MustEmptyDatabase(t)
	mustRun(t, env{"TERDUT_DATABASE_URL": db}, "migrate")
	mustQuery(t, db, markedFixture+`pw AS (INSERT INTO users (username) SELECT 'alice' FROM marked RETURNING id),
		sso AS (INSERT INTO users (username, oidc_issuer, oidc_subject) SELECT 'sam', 'https://idp.test', 'sam' FROM marked RETURNING id),
		s AS (INSERT INTO sessions (user_id, token_hash, expires_at) SELECT pw.id, sha256('expired'::bytea), now() - interval '1 second' FROM pw)
		INSERT INTO api_keys (user_id, name, key_hash) SELECT sso.id, 'sso', sha256('sso'::bytea) FROM sso`)
	mustQuery(t, db, `CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'api_keys are read-only in this test'; END$$`)
	mustQuery(t, db, `CREATE TRIGGER refuse_update BEFORE UPDATE ON api_keys FOR EACH ROW EXECUTE FUNCTION refuse_update()`)
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	housekeep(context.Background(), st, 24*time.Hour, 15*time.Minute, slog.New(slog.NewJSONHandler(&logs, nil)))

	if got := mustQuery(t, db, `SELECT count(*) FROM sessions`); len(got) != 1 || got[0] != "0" {
		t.Errorf("sessions after the round: got %v, want [0]: the sweep must run even when the cap fails", got)
	}
	mustContain(t, "log", logs.String(), "capping the API keys of single sign-on people failed", "housekeeping: swept dead rows")
}
