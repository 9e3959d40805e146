package alertmanager

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// TestAlertmanager_KeyRotationWithNoGap rotates the integration's key as docs/incidents.md
// says, while Alertmanager keeps sending: a second key, the credentials file rewritten (read
// at each delivery, no reload), the first key revoked. Every delivery is stored throughout.
func TestAlertmanager_KeyRotationWithNoGap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	am := amtest.Start(t, amtest.Options{WebhookURL: webhookURL(e.srv), CredentialsFile: e.credentials,
		RepeatInterval: 3 * time.Second})
	post(t, []amtest.Alert{{Labels: map[string]string{"alertname": "Rotating", "instance": "a"},
		StartsAt: time.Now().UTC().Truncate(time.Millisecond)}}, am)
	in := e.openIncident(t, "Rotating", 1)
	first := e.integration.Keys[0]
	waitFor(t, "the first key used", func() integration { return e.integrationNow(t) },
		func(in integration) bool { return len(in.Keys) == 1 && in.Keys[0].LastUsedAt != nil })

	resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Bearer: e.admin,
		Path: fmt.Sprintf("/api/integrations/%d/keys", e.integration.ID)})
	var second integrationKey
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /api/integrations/%d/keys: got %d %s, want 201", e.integration.ID, resp.Status, resp.Body)
	}
	resp.JSON(t, &second)
	apitest.WriteFile(t, e.credentials, second.Key+"\n")
	waitFor(t, "the second key used", func() integration { return e.integrationNow(t) }, func(in integration) bool {
		return len(in.Keys) == 2 && in.Keys[1].ID == second.ID && in.Keys[1].LastUsedAt != nil
	})

	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodDelete, Bearer: e.admin,
		Path: fmt.Sprintf("/api/integrations/%d/keys/%d", e.integration.ID, first.ID)})
	if resp.Status != http.StatusNoContent {
		t.Fatalf("DELETE the first key: got %d %s, want 204", resp.Status, resp.Body)
	}
	revoked := time.Now()
	waitDeliveries(t, e.srv, deliveries(t, e.srv), 2)
	after := waitFor(t, "a delivery after the revocation", func() integration { return e.integrationNow(t) },
		func(in integration) bool { return in.LastDeliveryAt != nil && in.LastDeliveryAt.After(revoked) })
	if len(after.Keys) != 1 || after.Keys[0].ID != second.ID || after.Keys[0].LastUsedAt == nil ||
		!after.Keys[0].LastUsedAt.After(revoked) {
		t.Errorf("integration: got keys %+v, want the second alone, used since the revocation", after.Keys)
	}
	if after.LastError != "" || after.LastErrorAt != nil {
		t.Errorf("integration: got last_error %q at %v, want none", after.LastError, after.LastErrorAt)
	}
	// No delivery was refused (a 401 names no integration, so the metric and Alertmanager's
	// log are where it would show).
	assertEveryDeliveryStored(t, []*amtest.Alertmanager{am}, e.srv)
	if got := types(e.timeline(t, in.ID)); !slices.Equal(got, []string{"triggered", "alert_added"}) {
		t.Errorf("timeline: got %v, want the firing's two events alone", got)
	}

	// The first key is dead: what Alertmanager sent since was the second's.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: webhookPath, Bearer: first.Key, Body: "{}"})
	if resp.Status != http.StatusUnauthorized {
		t.Errorf("a delivery with the revoked key: got %d %s, want 401", resp.Status, resp.Body)
	}
}
