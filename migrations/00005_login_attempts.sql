-- +goose Up
-- Password checks counted against the guessing limit, one row per username as typed (a SHA-256
-- of it lower-cased, whether or not such a user exists, so that nothing typed into the username
-- box is stored): the times of the checks within the window, never more than the limit. A check
-- is reserved under this row's lock before the password is checked, on any replica, and
-- released when the password was right, so the times left are the failures.
CREATE TABLE login_attempts (
    key        BYTEA         PRIMARY KEY,
    attempts   TIMESTAMPTZ[] NOT NULL,
    admitted   BOOLEAN       NOT NULL, -- whether the latest request was let through to a check
    touched_at TIMESTAMPTZ   NOT NULL DEFAULT now()
);
CREATE INDEX login_attempts_touched_at_idx ON login_attempts (touched_at);

-- login_failures is no longer written; it is kept for the replicas of the previous version
-- that still run during a rolling upgrade, and dropped by a later migration.

-- +goose Down
DROP TABLE login_attempts;
