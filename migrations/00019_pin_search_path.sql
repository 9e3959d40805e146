-- +goose Up
-- The functions terdut-server made resolve the tables and functions in their bodies through
-- the search_path they are given, and until now that was the caller's: a schema earlier in it
-- (a "$user" schema another role made, say), or pg_temp, which Postgres searches first for
-- tables unless it is named, could shadow api_keys, users or bootstrap_state inside them
-- (PostgreSQL's CVE-2018-1058 guidance). Each is pinned to the schema it lives in, where only
-- the server's own objects are found, with pg_temp last; pg_catalog, unnamed, comes first.
-- The schema is the one the server migrates in, current_schema(), as these functions were
-- created there. Every name this block calls is qualified: format() takes "any", so an
-- unqualified call could be captured by another role's exact-typed overload.
-- +goose StatementBegin
DO $$
DECLARE
    s TEXT := pg_catalog.current_schema();
    f TEXT;
BEGIN
    FOREACH f IN ARRAY ARRAY['api_key_owner(bytea)', 'refuse_ungated_insert()',
            'audit_events_guard()', 'bootstrap_audit_append_only()'] LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %I.%s SET search_path = %I, pg_temp', s, f, s);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    s TEXT := pg_catalog.current_schema();
    f TEXT;
BEGIN
    FOREACH f IN ARRAY ARRAY['api_key_owner(bytea)', 'refuse_ungated_insert()',
            'audit_events_guard()', 'bootstrap_audit_append_only()'] LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %I.%s RESET search_path', s, f);
    END LOOP;
END
$$;
-- +goose StatementEnd
