-- +goose Up
-- The audit says how the operator proved itself, and for a service-account token, who it was.
ALTER TABLE bootstrap_audit
    ADD COLUMN auth_method TEXT NOT NULL DEFAULT ''
        CHECK (auth_method IN ('', 'none', 'operator_token', 'service_account')),
    ADD COLUMN subject     TEXT NOT NULL DEFAULT '' CHECK (length(subject) <= 512),
    ADD COLUMN pod         TEXT NOT NULL DEFAULT '' CHECK (length(pod) <= 512);

-- +goose Down
ALTER TABLE bootstrap_audit DROP COLUMN pod, DROP COLUMN subject, DROP COLUMN auth_method;
