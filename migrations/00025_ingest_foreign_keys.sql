-- +goose Up
-- A notification that opens an incident of 50 alerts inserts 50 occurrences and 50 events, and
-- its resolution 50 more events; each foreign key of those rows was checked row by row (a
-- query and a lock of the incident, or of the alert, per row): 150 checks a group's cycle,
-- a tenth of what a notification cost Postgres (issue 38). The three below guarded nothing the
-- writers do not guard themselves:
--   - an occurrence or an event is written only into an incident its transaction holds: a
--     notification's open incident (locked FOR NO KEY UPDATE), a person's action's (locked
--     FOR NO KEY UPDATE, a note's FOR KEY SHARE), an incident it opens, or the incident of an
--     occurrence it resolves, which retention does not take while that occurrence fires;
--   - retention, the only writer that deletes incidents, locks them first and deletes their
--     events and occurrences with them (internal/store/retention.go);
--   - an event's alert is one of its incident's occurrences, which keep the alert (their own
--     foreign key, kept) until the incident goes with its events.
-- TestRetain_NotesRace and TestRetain_Exact hold retention and people's notes to that. Until every
-- replica runs this version, an older one's note or retention round may still leave a row of an
-- incident retention deleted (a note on an incident past the retention, in the moment it goes):
-- the down step below removes any such row before it adds the keys back.
ALTER TABLE incident_events DROP CONSTRAINT incident_events_incident_id_fkey,
    DROP CONSTRAINT incident_events_alert_id_fkey;
ALTER TABLE incident_alerts DROP CONSTRAINT incident_alerts_incident_id_fkey;

-- +goose Down
DELETE FROM incident_events e WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = e.incident_id);
UPDATE incident_events e SET alert_id = NULL
    WHERE alert_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM alerts a WHERE a.id = e.alert_id);
DELETE FROM incident_alerts o WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = o.incident_id);
ALTER TABLE incident_alerts ADD CONSTRAINT incident_alerts_incident_id_fkey
    FOREIGN KEY (incident_id) REFERENCES incidents (id) ON DELETE CASCADE;
ALTER TABLE incident_events ADD CONSTRAINT incident_events_incident_id_fkey
    FOREIGN KEY (incident_id) REFERENCES incidents (id) ON DELETE CASCADE,
    ADD CONSTRAINT incident_events_alert_id_fkey FOREIGN KEY (alert_id) REFERENCES alerts (id) ON DELETE SET NULL;
