-- +goose Up
-- The name of the groups claim (--oidc-groups-claim) that a person's single sign-ons have
-- carried; NULL for a person none of whose sign-ins carried one. Providers omit an empty
-- groups claim (Dex's groups is omitempty; Okta, Entra ID, Keycloak and Zitadel do the same),
-- so when the claim is missing for a person who has had it under this name, they were dropped
-- from every group: the refused sign-in disarms them as for any group not allowed. For a
-- person who never had it, a missing claim is more likely a configuration problem (a scope not
-- granted, a misspelt setting): that sign-in is refused with a warning and disarms nothing.
-- Existing people start at NULL: which claim their sign-ins carried was never recorded, so
-- the rule holds from their first sign-in with the claim after the upgrade.
ALTER TABLE users ADD COLUMN oidc_groups_claim TEXT;

-- +goose Down
ALTER TABLE users DROP COLUMN oidc_groups_claim;
