-- +goose Up
-- The incident domain (issue 38): Alertmanager's senders, the alerts they report, the incidents
-- their groups open, each alert's occurrences in an incident, and each incident's timeline.
-- Every function called here is pg_catalog's with exactly the types it is given (see
-- internal/store/schema.go).

-- An integration is one sender (an Alertmanager cluster) and a namespace: alerts are unique per
-- (integration, fingerprint), the open incident per (integration, groupKey). A deleted one keeps
-- its rows, for the incidents that name it, and takes no more deliveries.
CREATE TABLE integrations (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             TEXT        NOT NULL CHECK (name <> ''),
    expire_after     INTERVAL    NOT NULL DEFAULT '4 hours 30 minutes' CHECK (expire_after > '0'),
    created_by       BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    deleted_at       TIMESTAMPTZ,
    last_delivery_at TIMESTAMPTZ,
    last_error       TEXT,
    last_error_at    TIMESTAMPTZ
);
CREATE UNIQUE INDEX integrations_live_name_key ON integrations (name) WHERE deleted_at IS NULL;

-- An integration's keys, stored hashed (SHA-256 of a high-entropy secret), at most two live.
CREATE TABLE integration_keys (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration_id BIGINT      NOT NULL REFERENCES integrations (id),
    key_hash       BYTEA       NOT NULL,
    hint           TEXT        NOT NULL,
    created_by     BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at   TIMESTAMPTZ,
    revoked_at     TIMESTAMPTZ,
    CONSTRAINT integration_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX integration_keys_integration_idx ON integration_keys (integration_id);
CREATE INDEX integration_keys_created_by_idx ON integration_keys (created_by) WHERE revoked_at IS NULL;

-- One row per (integration, fingerprint), reused across occurrences: the columns of the feed
-- describe its current (newest) occurrence.
CREATE TABLE alerts (
    id                BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration_id    BIGINT      NOT NULL REFERENCES integrations (id),
    fingerprint       TEXT        NOT NULL,
    name              TEXT        NOT NULL,
    status            TEXT        NOT NULL CHECK (status IN ('firing', 'resolved')),
    labels            JSONB       NOT NULL,
    annotations       JSONB       NOT NULL,
    starts_at         TIMESTAMPTZ NOT NULL,
    ends_at           TIMESTAMPTZ,
    generator_url     TEXT        NOT NULL DEFAULT '',
    received_at       TIMESTAMPTZ NOT NULL,
    resolution_source TEXT        CHECK (resolution_source IN ('alertmanager', 'expiry')),
    incident_id       BIGINT,
    CONSTRAINT alerts_integration_fingerprint_key UNIQUE (integration_id, fingerprint),
    CHECK ((status = 'firing') = (resolution_source IS NULL))
);
CREATE INDEX alerts_feed_idx ON alerts (starts_at DESC, id DESC);
CREATE INDEX alerts_status_feed_idx ON alerts (status, starts_at DESC, id DESC);

CREATE TABLE incidents (
    id                    BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    integration_id        BIGINT      NOT NULL REFERENCES integrations (id),
    group_key             TEXT        NOT NULL,
    title                 TEXT        NOT NULL,
    group_labels          JSONB       NOT NULL,
    status                TEXT        NOT NULL CHECK (status IN ('triggered', 'acknowledged', 'resolved')),
    severity              TEXT,
    severity_rank         SMALLINT    NOT NULL DEFAULT 0,
    triggered_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    acknowledged_by_id    BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    acknowledged_at       TIMESTAMPTZ,
    first_acknowledged_at TIMESTAMPTZ,
    assigned_to_id        BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    snoozed_until         TIMESTAMPTZ,
    resolved_at           TIMESTAMPTZ,
    resolution_source     TEXT        CHECK (resolution_source IN ('alerts', 'manual')),
    archived_at           TIMESTAMPTZ,
    alert_count           INTEGER     NOT NULL DEFAULT 0,
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL)),
    CHECK ((resolved_at IS NULL) = (resolution_source IS NULL)),
    CHECK ((status = 'acknowledged') = (acknowledged_at IS NOT NULL) OR status = 'resolved'),
    CHECK (archived_at IS NULL OR resolved_at IS NOT NULL)
);
-- One open incident per group of an integration: the rule that makes concurrent deliveries
-- of one group, on any number of replicas, open one incident.
CREATE UNIQUE INDEX incidents_open_group_key ON incidents (integration_id, group_key) WHERE resolved_at IS NULL;
CREATE INDEX incidents_triggered_idx ON incidents (triggered_at DESC, id DESC);
CREATE INDEX incidents_open_idx ON incidents (triggered_at DESC, id DESC) WHERE resolved_at IS NULL;
CREATE INDEX incidents_archived_idx ON incidents (triggered_at DESC, id DESC) WHERE archived_at IS NOT NULL;
CREATE INDEX incidents_assigned_idx ON incidents (assigned_to_id) WHERE assigned_to_id IS NOT NULL;
CREATE INDEX incidents_acknowledged_by_idx ON incidents (acknowledged_by_id) WHERE acknowledged_by_id IS NOT NULL;

ALTER TABLE alerts ADD CONSTRAINT alerts_incident_fk FOREIGN KEY (incident_id) REFERENCES incidents (id) ON DELETE SET NULL;
CREATE INDEX alerts_incident_idx ON alerts (incident_id);

-- An occurrence: an alert's firing from one startsAt, as it was in one incident. Found by
-- (alert, group, startsAt), the newest first: a stale firing copy of an occurrence Alertmanager
-- resolved finds it resolved and reopens nothing; a new startsAt is a new occurrence. Only an
-- occurrence the server resolved by expiry, reported firing again, fires again: in place while
-- its incident is open, else as an occurrence of the group's open incident (hence the incident
-- in the key).
CREATE TABLE incident_alerts (
    id                BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    incident_id       BIGINT      NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
    alert_id          BIGINT      NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    group_key         TEXT        NOT NULL,
    starts_at         TIMESTAMPTZ NOT NULL,
    status            TEXT        NOT NULL CHECK (status IN ('firing', 'resolved')),
    ends_at           TIMESTAMPTZ,
    resolution_source TEXT        CHECK (resolution_source IN ('alertmanager', 'expiry')),
    last_seen_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT incident_alerts_occurrence_key UNIQUE (alert_id, group_key, starts_at, incident_id),
    CHECK ((status = 'firing') = (resolution_source IS NULL))
);
CREATE INDEX incident_alerts_incident_idx ON incident_alerts (incident_id, status, id);
-- The expiry sweep's candidates, oldest report first.
CREATE INDEX incident_alerts_expiry_idx ON incident_alerts (last_seen_at) WHERE status = 'firing';

-- The timeline, written on transitions only. username keeps the name shown at the time.
CREATE TABLE incident_events (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    incident_id BIGINT      NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
    type        TEXT        NOT NULL,
    user_id     BIGINT      REFERENCES users (id) ON DELETE SET NULL,
    username    TEXT        NOT NULL DEFAULT '',
    alert_id    BIGINT      REFERENCES alerts (id) ON DELETE SET NULL,
    detail      TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX incident_events_incident_idx ON incident_events (incident_id, id);
CREATE INDEX incident_events_user_idx ON incident_events (user_id) WHERE user_id IS NOT NULL;

-- +goose Down
DROP TABLE incident_events;
DROP TABLE incident_alerts;
ALTER TABLE alerts DROP CONSTRAINT alerts_incident_fk;
DROP TABLE incidents;
DROP TABLE alerts;
DROP TABLE integration_keys;
DROP TABLE integrations;
