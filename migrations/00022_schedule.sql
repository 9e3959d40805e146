-- +goose Up
-- The on-call schedule (issue 39): one person a UTC day. A new incident goes to the day's
-- person (internal/store/ingest.go's createIncident). Deleting a person deletes their days.
CREATE TABLE schedule (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    BIGINT      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    date       DATE        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- One person a day, however many replicas assign it at once.
    CONSTRAINT schedule_date_key UNIQUE (date)
);
-- A person's days, for their deletion.
CREATE INDEX schedule_user_idx ON schedule (user_id);

-- +goose Down
DROP TABLE schedule;
