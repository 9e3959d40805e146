-- +goose Up
-- The claim is explicit state: one row, never derived from the number of users.
CREATE TABLE bootstrap_state (
    id            BOOLEAN     PRIMARY KEY DEFAULT TRUE CHECK (id),
    state         TEXT        NOT NULL CHECK (state IN ('pending', 'complete')),
    generation    BIGINT      NOT NULL DEFAULT 0 CHECK (generation >= 0),
    principal_id  BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    last_claim_at TIMESTAMPTZ,
    last_reset_at TIMESTAMPTZ
);

CREATE TABLE bootstrap_audit (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    action      TEXT        NOT NULL CHECK (action IN ('backfill', 'claim', 'reset')),
    actor       TEXT        NOT NULL CHECK (actor IN ('operator', 'cli', 'migration')),
    remote_addr TEXT        NOT NULL DEFAULT '',
    generation  BIGINT      NOT NULL,
    state       TEXT        NOT NULL,
    detail      TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX bootstrap_audit_action_at_idx ON bootstrap_audit (action, at);

-- +goose StatementBegin
CREATE FUNCTION bootstrap_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'bootstrap_audit is append-only';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER bootstrap_audit_append_only
    BEFORE UPDATE OR DELETE ON bootstrap_audit
    FOR EACH ROW EXECUTE FUNCTION bootstrap_audit_append_only();

CREATE TRIGGER bootstrap_audit_no_truncate
    BEFORE TRUNCATE ON bootstrap_audit
    FOR EACH STATEMENT EXECUTE FUNCTION bootstrap_audit_append_only();

-- An install claimed under the old rule (any user present) keeps working after the upgrade.
-- The old rule's bootstrap principal, if it exists, is adopted so that a later reset can revoke its keys.
INSERT INTO bootstrap_state (state, generation, principal_id, last_claim_at)
SELECT CASE WHEN EXISTS (SELECT 1 FROM users) THEN 'complete' ELSE 'pending' END,
       CASE WHEN EXISTS (SELECT 1 FROM users) THEN 1 ELSE 0 END,
       (SELECT id FROM users WHERE username = 'terdut-operator-bootstrap' AND kind = 'service'),
       CASE WHEN EXISTS (SELECT 1 FROM users) THEN now() END;

INSERT INTO bootstrap_audit (action, actor, generation, state, detail)
SELECT 'backfill', 'migration', generation, state,
       CASE WHEN state = 'complete' THEN 'users present at upgrade' ELSE 'no users at upgrade' END
FROM bootstrap_state;

-- Sign-in state lives in the database so a flow started on one replica completes on any other.
CREATE TABLE oidc_logins (
    state_hash    BYTEA       PRIMARY KEY,
    nonce         TEXT        NOT NULL,
    code_verifier TEXT        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX oidc_logins_expires_at_idx ON oidc_logins (expires_at);

-- +goose Down
DROP TABLE oidc_logins;
DROP TABLE bootstrap_audit;
DROP FUNCTION bootstrap_audit_append_only();
DROP TABLE bootstrap_state;
