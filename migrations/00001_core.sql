-- +goose Up
CREATE TABLE users (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      TEXT        NOT NULL,
    email         TEXT        NOT NULL DEFAULT '',
    password_hash TEXT,
    role          TEXT        NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member')),
    kind          TEXT        NOT NULL DEFAULT 'human' CHECK (kind IN ('human', 'service')),
    oidc_issuer   TEXT,
    oidc_subject  TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT users_username_key UNIQUE (username),
    CONSTRAINT users_oidc_identity_key UNIQUE (oidc_issuer, oidc_subject),
    CONSTRAINT users_oidc_identity_pair CHECK ((oidc_issuer IS NULL) = (oidc_subject IS NULL))
);

-- Names differing only in case would let one person pass for another.
CREATE UNIQUE INDEX users_username_lower_key ON users (lower(username));

CREATE TABLE api_keys (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT        NOT NULL,
    key_hash     BYTEA       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);

CREATE TABLE sessions (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ,
    CONSTRAINT sessions_token_hash_key UNIQUE (token_hash)
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);

-- +goose Down
DROP TABLE sessions;
DROP TABLE api_keys;
DROP TABLE users;
