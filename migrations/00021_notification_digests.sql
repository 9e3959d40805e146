-- +goose Up
-- The last notification applied to each group of an integration, as a digest of what it said
-- (internal/store/digest.go): the same snapshot again within seconds (an HA pair's twin, a
-- retry, a replica's repeat) is answered from one read, without a transaction.
CREATE TABLE notification_digests (
    integration_id BIGINT      NOT NULL REFERENCES integrations (id),
    group_key      TEXT        NOT NULL,
    digest         BYTEA       NOT NULL,
    applied_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (integration_id, group_key)
);

-- +goose Down
DROP TABLE notification_digests;
