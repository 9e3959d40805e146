-- +goose Up
-- A key may expire (expires_at on create); the keys of people who sign in through single
-- sign-on always do, within --sso-api-key-max-ttl. NULL: the key never expires.
ALTER TABLE api_keys ADD COLUMN expires_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN expires_at;
