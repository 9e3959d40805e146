package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_WebhookListen: with --webhook-listen, Alertmanager's webhook is served on a port of
// its own that answers nothing else (not the people's API, not the claim), and on --listen as
// well; without it, there is no such port.
func TestServe_WebhookListen(t *testing.T) {
	dbURL := pgtest.MustDatabase(t)
	// This machine is a trusted proxy, as an ingress would be: on the people's port its
	// X-Forwarded-For names the client.
	srv := startServe(t, env{"TERDUT_DATABASE_URL": dbURL}, "--webhook-listen", "127.0.0.1:0", "--trusted-proxies", "127.0.0.1/32")
	webhookURL := listenURL(srv.Stderr.String(), "terdut-server listening for Alertmanager")
	if webhookURL == "" || webhookURL == srv.URL {
		t.Fatalf("got webhook URL %q (people's: %s), want a port of its own in the log:\n%s", webhookURL, srv.URL, srv.Stderr)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	body := firingNotification()
	post := func(base, key, forwardedFor string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+"/api/webhooks/alertmanager", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Forwarded-For", forwardedFor)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	status, resp := post(webhookURL, key, "")
	mustStatus(t, "POST the webhook on --webhook-listen", status, resp, http.StatusOK, nil)
	status, resp = post(srv.URL, key, "")
	mustStatus(t, "POST the webhook on --listen", status, resp, http.StatusOK, nil)

	// A refused key is a security event that names the client: on the people's port, as its
	// trusted proxy says; on the webhook's, by its own address whatever the headers say. The
	// event is logged at most once a second, so each port is asked until its line is there.
	refusals := func() []string {
		var out []string
		for _, line := range strings.Split(srv.Stderr.String(), "\n") {
			if strings.Contains(line, `"event":"webhook.alertmanager"`) {
				out = append(out, line)
			}
		}
		return out
	}
	wrong := store.IntegrationKeyPrefix + strings.Repeat("0", 64)
	for i, c := range []struct{ base, forwardedFor, want string }{
		{srv.URL, "198.51.100.9", `"client_addr":"198.51.100.9"`},
		{webhookURL, "203.0.113.7", `"client_addr":"127.0.0.1"`},
	} {
		deadline := time.Now().Add(startTimeout)
		for len(refusals()) <= i && time.Now().Before(deadline) {
			status, resp := post(c.base, wrong, c.forwardedFor)
			mustStatus(t, "POST the webhook with a wrong key", status, resp, http.StatusUnauthorized, nil)
			time.Sleep(100 * time.Millisecond)
		}
		if got := refusals(); len(got) <= i || !strings.Contains(got[i], c.want) {
			t.Fatalf("refusal %d on %s: got %q, want a line with %s", i, c.base, got, c.want)
		}
	}
	for _, path := range []string{"/api/me", "/api/bootstrap/status", "/healthz", "/api/incidents"} {
		status, body := srv.doAt(t, webhookURL, http.MethodGet, path, "")
		mustNotFound(t, "GET "+path+" on --webhook-listen", status, body)
	}
	if strings.Contains(srv.Stderr.String(), "203.0.113.7") {
		t.Errorf("the address a header named on the webhook's port reached the log:\n%s", srv.Stderr)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	plain := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustDatabase(t)})
	if u := listenURL(plain.Stderr.String(), "terdut-server listening for Alertmanager"); u != "" {
		t.Errorf("got a webhook port %s without --webhook-listen, want none", u)
	}
}

// firingNotification is Alertmanager's notification of one alert, X, firing since now.
func firingNotification() []byte {
	body, _ := json.Marshal(map[string]any{"version": "4", "groupKey": "{}:{alertname=\"X\"}", "status": "firing",
		"groupLabels": map[string]string{"alertname": "X"}, "alerts": []map[string]any{{"status": "firing",
			"labels": map[string]string{"alertname": "X"}, "startsAt": time.Now().UTC().Format(time.RFC3339), "fingerprint": "f1"}}})
	return body
}
