-- +goose Up
-- A client's X-Request-Id, kept beside the server's own id (request_id), never in its place:
-- a client chooses its id as it likes, so a leaked key could otherwise take the id of another
-- admin's request and blur the record. Rows written by a replica of an earlier version, during
-- a rolling upgrade, get ''.
ALTER TABLE audit_events
    ADD COLUMN client_request_id TEXT NOT NULL DEFAULT '' CHECK (length(client_request_id) <= 64);

-- +goose Down
ALTER TABLE audit_events DROP COLUMN client_request_id;
