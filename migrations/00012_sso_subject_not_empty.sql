-- +goose Up
-- A single sign-on person is their (issuer, subject), and neither may be empty. Earlier
-- versions accepted an ID token without sub: every such sign-in of an issuer landed in one
-- account with an empty subject, renamed and re-roled by whoever signed in last. Such an
-- account is nobody's: at the upgrade it is disarmed (a member, its sessions and API keys
-- revoked) and given a subject no sign-in can reach (a sub over 255 characters, which OpenID
-- Connect forbids and the server refuses), so its data stays and it stays single sign-on.
UPDATE api_keys SET revoked_at = now()
    WHERE revoked_at IS NULL
      AND user_id IN (SELECT id FROM users WHERE oidc_subject = '' OR oidc_issuer = '');
UPDATE sessions SET revoked_at = now()
    WHERE revoked_at IS NULL
      AND user_id IN (SELECT id FROM users WHERE oidc_subject = '' OR oidc_issuer = '');
UPDATE users SET role = 'member',
    oidc_subject = 'terdut-server: this account was made by sign-ins without a subject, and is nobody''s; user ' || id || repeat('.', 200)
    WHERE oidc_subject = '' OR oidc_issuer = '';

ALTER TABLE users ADD CONSTRAINT users_oidc_identity_not_empty
    CHECK (oidc_issuer <> '' AND oidc_subject <> '');

-- +goose Down
ALTER TABLE users DROP CONSTRAINT users_oidc_identity_not_empty;
