-- +goose Up
-- When the person last authenticated at the single sign-on provider, as its ID token's
-- auth_time says, for each single sign-on session: a key is made from such a session only if
-- this is within --sso-key-sign-in-window. The session's created_at is no measure of it: a
-- provider that remembers a person for days signs them in again without asking anything.
-- NULL: the provider did not say (or the session is a password one, or older than this
-- column, or made by an older replica): such a session makes keys only after a step-up
-- sign-in.
ALTER TABLE sessions ADD COLUMN authenticated_at TIMESTAMPTZ;

-- A step-up sign-in (GET /auth/oidc/login?reauth=1) asked the provider to authenticate the
-- person again (max_age=0, prompt=login): its callback then requires an auth_time from
-- after the sign-in began. Older replicas leave it false, which asks nothing more of them.
ALTER TABLE oidc_logins ADD COLUMN step_up BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE oidc_logins DROP COLUMN step_up;
ALTER TABLE sessions DROP COLUMN authenticated_at;
