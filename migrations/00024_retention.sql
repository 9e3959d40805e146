-- +goose Up
-- Retention (issue 39) deletes resolved incidents by when they were resolved, oldest first, in
-- batches: this index finds each batch where it starts. Open incidents are not in it, so a
-- notification that opens one, or adds to it, writes nothing here.
CREATE INDEX incidents_resolved_at_idx ON incidents (resolved_at, id) WHERE resolved_at IS NOT NULL;

-- +goose Down
DROP INDEX incidents_resolved_at_idx;
