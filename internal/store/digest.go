package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"time"

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

// digestOf is the SHA-256 of what a notification says: its group, its status and what it
// left out, its group's and common labels, and its alerts in the order Ingest applies them
// (cols, their encoded columns), each field prefixed by its length; times as instants.
func digestOf(n Notification, alerts []NotifiedAlert, cols alertColumns) []byte {
	h := sha256.New()
	var size [binary.MaxVarintLen64]byte
	var val []byte
	field := func(b []byte) {
		h.Write(binary.AppendUvarint(size[:0], uint64(len(b))))
		h.Write(b)
	}
	instant := func(t time.Time) {
		val = binary.AppendUvarint(binary.AppendVarint(val[:0], t.Unix()), uint64(t.Nanosecond()))
		field(val)
	}
	field([]byte(n.GroupKey))
	field([]byte(n.Status))
	field(binary.AppendVarint(val[:0], int64(n.TruncatedAlerts)))
	field(appendJSONObject(nil, n.GroupLabels))
	field(appendJSONObject(nil, n.CommonLabels))
	for i, a := range alerts {
		for _, s := range []string{cols.fingerprint[i], cols.status[i], cols.labels[i], cols.annotations[i], cols.generatorURL[i]} {
			field([]byte(s))
		}
		instant(a.StartsAt)
		instant(a.EndsAt)
	}
	return h.Sum(nil)
}

// appliedRecently reports whether the group's last applied notification had this digest and was
// applied within replayWindow; if so, it records the delivery (replayed).
func (s *Store) appliedRecently(ctx context.Context, caller IntegrationCaller, groupKey string, digest []byte) (bool, error) {
	var recent bool
	err := s.pool.QueryRow(ctx, `SELECT applied_at >= now() - interval '`+replayWindow+`' FROM notification_digests
		WHERE integration_id = $1 AND group_key = $2 AND digest = $3`, caller.IntegrationID, groupKey, digest).Scan(&recent)
	return s.replayed(ctx, caller, recent, err)
}

// ReplayedBody reports whether the body whose SHA-256 is sum is, byte for byte, its group's last
// applied notification (Notification.BodySum), applied within replayWindow and as the digest
// the group still has; if so, it records the delivery and returns how many alerts the body
// held. The caller then answers the body as applied without reading it.
func (s *Store) ReplayedBody(ctx context.Context, caller IntegrationCaller, sum []byte) (alerts int, replay bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT body_alerts FROM notification_digests
		WHERE integration_id = $1 AND body = $2 AND body_of = digest AND applied_at >= now() - interval '`+replayWindow+`'
		LIMIT 1`, caller.IntegrationID, sum).Scan(&alerts)
	replay, err = s.replayed(ctx, caller, err == nil, err)
	return alerts, replay, err
}

// replayed ends a replay's read (found, or err): none when no row was found; else, if found,
// the delivery recorded on the integration and its key (touchIntegrationSQL) unless their
// authentication found both recorded within the second.
func (s *Store) replayed(ctx context.Context, caller IntegrationCaller, found bool, err error) (bool, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, wrap(err, "read the group's last notification")
	case found && !caller.touchedRecently:
		_, err = s.pool.Exec(ctx, touchIntegrationSQL, caller.IntegrationID, caller.KeyID)
	}
	return found, wrap(err, "record the delivery")
}
