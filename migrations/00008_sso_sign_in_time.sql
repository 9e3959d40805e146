-- +goose Up
-- The time of each person's last single sign-on: their API keys expire at most
-- --sso-api-key-max-ttl after it, whatever key or session made them, so that rotating keys
-- cannot keep a person the provider dropped in. NULL for people who never signed in
-- through single sign-on.
ALTER TABLE users ADD COLUMN last_sso_at TIMESTAMPTZ;

-- The single sign-on people of an existing install: when they last signed in was never
-- recorded, so the upgrade counts as their last sign-in. That grants nothing: every key of
-- theirs already expires within --sso-api-key-max-ttl of its making or of the last sweep,
-- so before now plus the setting; and it cuts nobody off, as an earlier guess (the person's
-- creation, their oldest surviving session) would for everyone who signed in recently but
-- first long ago. From here on a key minted from a key cannot outlive the upgrade plus the
-- setting unless the person signs in again.
UPDATE users SET last_sso_at = now() WHERE oidc_issuer IS NOT NULL;

-- +goose Down
ALTER TABLE users DROP COLUMN last_sso_at;
