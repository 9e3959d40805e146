-- +goose Up
-- The API-key lookup as a PL/pgSQL function, for the statement modes that prepare nothing by
-- name (behind a transaction-mode pooler, --database-pooler=transaction; or a URL's
-- default_query_exec_mode of simple_protocol, exec or cache_describe). There every statement
-- is parsed and planned anew, and the lookup, the statement of every API-key request, cost
-- Postgres about 110 us a request where a prepared one costs 30 (docs/pooler.md#figures). A
-- PL/pgSQL function keeps the plan of its query for as long as the server connection lives,
-- which behind a pooler is across every client that borrows it; what is sent each time is a
-- call Postgres parses and plans in a few microseconds.
--
-- It must answer exactly as authenticateAPIKeySQL in internal/store/apikeys.go does (the store's
-- tests hold the two to each other): a live key's owner, and whether last_used_at is due for a
-- refresh. It runs with the caller's rights and search_path, as that statement does, and is
-- PL/pgSQL on purpose: a SQL function would be inlined into the call and planned every time.
-- A migration that changes the columns it reads replaces it in the same step.
-- +goose StatementBegin
CREATE FUNCTION api_key_owner(secret_hash BYTEA)
RETURNS TABLE (stale BOOLEAN, id BIGINT, username TEXT, email TEXT, role TEXT, kind TEXT,
    oidc_issuer TEXT, oidc_subject TEXT, has_password BOOLEAN, created_at TIMESTAMPTZ)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY SELECT k.last_used_at < now() - interval '30 seconds',
        u.id, u.username, u.email, u.role, u.kind, u.oidc_issuer, u.oidc_subject,
        u.password_hash IS NOT NULL, u.created_at
        FROM api_keys k JOIN users u ON u.id = k.user_id
        WHERE k.key_hash = secret_hash AND k.revoked_at IS NULL
            AND (k.expires_at IS NULL OR k.expires_at > now());
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION api_key_owner(BYTEA);
