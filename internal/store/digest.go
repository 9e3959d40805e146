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
// replayWindow, be answered with no write: from the SHA-256 of its body, before it is decoded,
// when it comes byte for byte as before (AuthenticateDelivery, ReplayedBody); else from its digest, read with the
// group under its lock (Ingest). The window is what keeps that safe: within it,
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

// appliedRecentlySQL says whether the group's ($1, $2) last applied notification had the digest
// $3 and was applied within replayWindow (no row: it had another). Ingest reads it with the
// group, under its lock.
const appliedRecentlySQL = `SELECT applied_at >= now() - interval '` + replayWindow + `' FROM notification_digests
	WHERE integration_id = $1 AND group_key = $2 AND digest = $3`

// ReplayedBody reports whether the body whose SHA-256 is sum is, byte for byte, its group's last
// applied notification (Notification.BodySum), applied within replayWindow and as the digest
// the group still has; if so, it records the delivery and returns how many alerts the body
// held. The caller then answers the body as applied without decoding it. AuthenticateDelivery
// asks the same with the key's authentication.
func (s *Store) ReplayedBody(ctx context.Context, caller IntegrationCaller, sum []byte) (alerts int, replay bool, err error) {
	err = s.pool.QueryRow(ctx, replayedBodySQL, caller.IntegrationID, sum).Scan(&alerts)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, wrap(err, "read the group's last notification")
	}
	return alerts, true, s.recordReplay(ctx, caller)
}

// replayedBodySQL reads the count of alerts of the body whose SHA-256 is $2 if it is the last
// notification applied, within replayWindow, to a group of the integration $1, as the digest
// that group still has (body_of); authenticateDeliverySQL asks it of the key's integration.
var replayedBodySQL = replayedBodyOf("$1")

func replayedBodyOf(integrationID string) string {
	return `SELECT body_alerts FROM notification_digests
		WHERE integration_id = ` + integrationID + ` AND body = $2 AND body_of = digest
			AND applied_at >= now() - interval '` + replayWindow + `'
		LIMIT 1`
}

// recordReplay records a replay's delivery on the integration and its key, unless their
// authentication found both recorded within the second.
func (s *Store) recordReplay(ctx context.Context, caller IntegrationCaller) error {
	if caller.touchedRecently {
		return nil
	}
	_, err := s.pool.Exec(ctx, touchIntegrationSQL, caller.IntegrationID, caller.KeyID)
	return wrap(err, "record the delivery")
}
