-- +goose NO TRANSACTION
-- +goose Up
-- Indexes that keep the housekeeping sweep and the audit's filters as fast at a million people
-- as at a thousand (issue 32). Before them, every sweep round read the whole sessions and
-- api_keys tables (nothing indexed revoked_at or expires_at), and GET /api/audit?actor=operator
-- (or cli, migration, provider) read every audit row.
--
-- CONCURRENTLY: these tables are the large ones of an install that has run for a while, and a
-- plain CREATE INDEX holds a lock that blocks every write to its table (every sign-in, every
-- new key, every audit row) until it is built. CONCURRENTLY builds while writes go on. It cannot
-- run in a transaction, hence NO TRANSACTION; a build that fails half-way (a replica killed
-- during it) leaves an INVALID index behind, so each is dropped first if it exists: running the
-- migration again finishes it. Replicas of the previous version keep running during it: it only
-- adds indexes.

-- The sweep's revoked rows, and its expired ones: partial where most rows are not wanted, so
-- that the index holds only what the sweep deletes (revoked) or what can expire.
DROP INDEX CONCURRENTLY IF EXISTS sessions_revoked_at_idx;
CREATE INDEX CONCURRENTLY sessions_revoked_at_idx ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS sessions_expires_at_idx;
CREATE INDEX CONCURRENTLY sessions_expires_at_idx ON sessions (expires_at);
DROP INDEX CONCURRENTLY IF EXISTS api_keys_revoked_at_idx;
CREATE INDEX CONCURRENTLY api_keys_revoked_at_idx ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS api_keys_expires_at_idx;
CREATE INDEX CONCURRENTLY api_keys_expires_at_idx ON api_keys (expires_at) WHERE expires_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS password_links_expires_at_idx;
CREATE INDEX CONCURRENTLY password_links_expires_at_idx ON password_links (expires_at);

-- GET /api/audit?actor=operator (a kind of actor, not a user's id), newest first.
DROP INDEX CONCURRENTLY IF EXISTS audit_events_actor_kind_idx;
CREATE INDEX CONCURRENTLY audit_events_actor_kind_idx ON audit_events (actor_kind, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_events_actor_kind_idx;
DROP INDEX CONCURRENTLY IF EXISTS password_links_expires_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS api_keys_expires_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS api_keys_revoked_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS sessions_expires_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS sessions_revoked_at_idx;
