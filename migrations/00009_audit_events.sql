-- +goose Up
-- Administrative actions (people created, deleted, given a password or a role; keys created or
-- revoked; claims and resets), one row each, readable by admins (GET /api/audit) and from the
-- shell (terdut-server audit). Claims and resets are written here too, in the transaction that
-- writes their bootstrap_audit row, so that a reset and the principal's actions read side by side.
CREATE TABLE audit_events (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    event       TEXT        NOT NULL CHECK (event ~ '^[a-z_]+(\.[a-z_]+)+$' AND length(event) <= 64),
    actor_kind  TEXT        NOT NULL CHECK (actor_kind IN ('user', 'operator', 'cli', 'migration', 'provider')),
    -- The acting user, for actor_kind 'user'. No foreign key: the record outlives the user.
    actor_id    BIGINT,
    actor_name  TEXT        NOT NULL DEFAULT '' CHECK (length(actor_name) <= 512),
    target_id   BIGINT,
    target_name TEXT        NOT NULL DEFAULT '' CHECK (length(target_name) <= 512),
    remote_addr TEXT        NOT NULL DEFAULT '' CHECK (length(remote_addr) <= 64),
    request_id  TEXT        NOT NULL DEFAULT '' CHECK (length(request_id) <= 64),
    detail      TEXT        NOT NULL DEFAULT '' CHECK (length(detail) <= 1024)
);
CREATE INDEX audit_events_actor_id_idx ON audit_events (actor_id, id);
CREATE INDEX audit_events_event_idx ON audit_events (event, id);
CREATE INDEX audit_events_at_idx ON audit_events (at);

-- The claims and resets before this version, so that the history reads whole.
INSERT INTO audit_events (at, event, actor_kind, actor_name, target_id, remote_addr, detail)
SELECT at, 'bootstrap.' || action, actor, auth_method, NULL, left(remote_addr, 64),
       left('generation ' || generation || '; ' || state || CASE WHEN detail <> '' THEN '; ' || detail ELSE '' END, 1024)
FROM bootstrap_audit ORDER BY id;

-- Append-only, like bootstrap_audit, with one exception: the retention. A row may be deleted
-- only once it is older than the retention that the deleting transaction names in the setting
-- terdut.audit_retention (at least a day), which the housekeeping sweep sets with SET LOCAL
-- semantics (set_config(..., true)) before its DELETE. The age is the row's own, checked by the
-- database for every row whoever deletes it, and an insert cannot backdate a row (its time is
-- always now()): whatever a statement says, no row younger than a day can go, and none younger
-- than the retention the sweep applies. A SECURITY DEFINER function would add a boundary only
-- with a database role apart from the server's, which owns these tables (it migrates them);
-- with one role, it would only move the same check into a function.
-- +goose StatementBegin
CREATE FUNCTION audit_events_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    retention interval;
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.at := now();
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        retention := nullif(current_setting('terdut.audit_retention', true), '')::interval;
        IF retention >= interval '1 day' AND OLD.at < now() - retention THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'audit_events is append-only: only the housekeeping sweep deletes rows, once older than the retention';
    END IF;
    RAISE EXCEPTION 'audit_events is append-only';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_insert
    BEFORE INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_guard();

CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_guard();

CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_guard();

-- +goose Down
DROP TABLE audit_events;
DROP FUNCTION audit_events_guard();
