package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
)

// A notification is a snapshot of its group, and Alertmanager sends the same one again and
// again: both members of an HA pair send each, a failure is retried, every repeat_interval
// re-sends it. The digest of the last one applied to a group lets the same one again, within
// replayWindow, be answered from one read. The window is what keeps that safe: within it,
// the stored state is what applying the snapshot again would leave (its firing occurrences
// were reported at most refreshAfter before it was applied, so none can have expired, the
// least expire_after being a minute), except what a newer notification changed, whose digest
// then differs.
const replayWindow = "15 seconds"

// digestOf is the SHA-256 of what a notification says, its alerts in the order Ingest applies
// them (maps encode in the order of their keys).
func digestOf(n Notification, alerts []NotifiedAlert) ([]byte, error) {
	b, err := json.Marshal(struct {
		GroupKey        string
		Status          string
		TruncatedAlerts int
		GroupLabels     map[string]string
		CommonLabels    map[string]string
		Alerts          []NotifiedAlert
	}{n.GroupKey, n.Status, n.TruncatedAlerts, n.GroupLabels, n.CommonLabels, alerts})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// appliedRecently reports whether the group's last applied notification had this digest and was
// applied within replayWindow; if so, it records the delivery on the integration and its key
// (touchIntegrationSQL) unless their authentication found both recorded within the second.
func (s *Store) appliedRecently(ctx context.Context, caller IntegrationCaller, groupKey string, digest []byte) (bool, error) {
	var recent bool
	err := s.pool.QueryRow(ctx, `SELECT applied_at >= now() - interval '`+replayWindow+`' FROM notification_digests
		WHERE integration_id = $1 AND group_key = $2 AND digest = $3`, caller.IntegrationID, groupKey, digest).Scan(&recent)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, wrap(err, "read the group's last notification")
	case recent && !caller.touchedRecently:
		_, err = s.pool.Exec(ctx, touchIntegrationSQL, caller.IntegrationID, caller.KeyID)
	}
	return recent, wrap(err, "record the delivery")
}
