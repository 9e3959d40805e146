-- +goose Up
-- A set-password link: what an admin gives a person instead of choosing their password. One a
-- person (a new one replaces the last); the token is kept only as its SHA-256, is used once
-- (redeeming deletes the row) and expires. A password change deletes the person's link.
CREATE TABLE password_links (
    user_id    BIGINT      PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    token_hash BYTEA       NOT NULL UNIQUE,
    created_by BIGINT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE password_links;
