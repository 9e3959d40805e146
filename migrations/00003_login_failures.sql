-- +goose Up
-- Failed password sign-ins, by the username as typed (lower-cased, whether or not such a
-- user exists), so that guessing is throttled across every replica.
CREATE TABLE login_failures (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username TEXT        NOT NULL,
    at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_username_at_idx ON login_failures (username, at);
CREATE INDEX login_failures_at_idx ON login_failures (at);

-- +goose Down
DROP TABLE login_failures;
