-- +goose Up
-- A notification sent again byte for byte (Alertmanager re-sends a group's snapshot as it wrote
-- it: a retry, every repeat_interval, a replica's repeat) is answered from the SHA-256 of its
-- body, before its JSON is read: reading it was most of what a replay cost the server (issue
-- 38). With a group's last applied notification are kept the SHA-256 of its body (body), the
-- number of alerts it held (body_alerts, for the answer) and the digest it was applied as
-- (body_of). A replica of an older version updates digest and applied_at and not these, so a
-- body is taken for a replay only while the group's digest is still the one it was applied as
-- (internal/store/digest.go).
ALTER TABLE notification_digests ADD COLUMN body BYTEA, ADD COLUMN body_of BYTEA, ADD COLUMN body_alerts INTEGER;
CREATE INDEX notification_digests_body_idx ON notification_digests (integration_id, body) WHERE body IS NOT NULL;

-- +goose Down
DROP INDEX notification_digests_body_idx;
ALTER TABLE notification_digests DROP COLUMN body, DROP COLUMN body_of, DROP COLUMN body_alerts;
