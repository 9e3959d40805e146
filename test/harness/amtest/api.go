package amtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Alert is an alert as Prometheus posts it to POST /api/v2/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// StartsAt zero: Alertmanager takes the time it receives the alert.
	StartsAt time.Time `json:"startsAt,omitzero"`
	// EndsAt zero: the alert fires until it is posted again or for resolve_timeout; in the
	// past: the alert is resolved (Prometheus posts a resolved alert with its end time).
	EndsAt       time.Time `json:"endsAt,omitzero"`
	GeneratorURL string    `json:"generatorURL,omitempty"`
}

// AlertStatus is an alert as GET /api/v2/alerts shows it.
type AlertStatus struct {
	// Fingerprint is Alertmanager's hash of the labels, as notifications carry it.
	Fingerprint  string            `json:"fingerprint"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		// State is "active", "suppressed" (silenced or inhibited) or "unprocessed".
		State       string   `json:"state"`
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
	Receivers []struct {
		Name string `json:"name"`
	} `json:"receivers"`
}

// Matcher is one condition of a silence on an alert's label.
type Matcher struct {
	Name, Value string
	// Regex: Value is a regular expression (anchored) rather than the value itself.
	Regex bool
	// NotEqual: the silence matches alerts whose label does not match Value.
	NotEqual bool
}

// Status is what GET /api/v2/status answers, in part.
type Status struct {
	Cluster struct {
		Name string `json:"name"`
		// Status is "ready", "settling" or "disabled" (not clustered).
		Status string `json:"status"`
		Peers  []struct {
			Name    string `json:"name"`
			Address string `json:"address"`
		} `json:"peers"`
	} `json:"cluster"`
	VersionInfo struct {
		Version string `json:"version"`
	} `json:"versionInfo"`
	Config struct {
		// Original is the configuration Alertmanager runs, as it reads it.
		Original string `json:"original"`
	} `json:"config"`
}

// PostAlerts posts alerts as Prometheus does (POST /api/v2/alerts). Alertmanager accepts the
// valid ones even when it refuses others; the error then carries its answer.
func (am *Alertmanager) PostAlerts(ctx context.Context, alerts []Alert) error {
	return am.do(ctx, http.MethodPost, "/api/v2/alerts", alerts, nil)
}

// Alerts returns the alerts Alertmanager holds that have not ended (GET /api/v2/alerts; a
// resolved alert is left out), silenced and inhibited ones included, ordered by fingerprint.
func (am *Alertmanager) Alerts(ctx context.Context) ([]AlertStatus, error) {
	var alerts []AlertStatus
	err := am.get(ctx, "/api/v2/alerts", &alerts)
	return alerts, err
}

// Silence silences the alerts matching every one of matchers from now until until (POST
// /api/v2/silences) and returns the silence's ID.
func (am *Alertmanager) Silence(ctx context.Context, matchers []Matcher, until time.Time) (string, error) {
	type matcher struct {
		Name    string `json:"name"`
		Value   string `json:"value"`
		IsRegex bool   `json:"isRegex"`
		IsEqual bool   `json:"isEqual"`
	}
	body := struct {
		Matchers  []matcher `json:"matchers"`
		StartsAt  time.Time `json:"startsAt"`
		EndsAt    time.Time `json:"endsAt"`
		CreatedBy string    `json:"createdBy"`
		Comment   string    `json:"comment"`
	}{StartsAt: time.Now(), EndsAt: until, CreatedBy: "amtest", Comment: "a test's silence"}
	for _, m := range matchers {
		body.Matchers = append(body.Matchers, matcher{Name: m.Name, Value: m.Value, IsRegex: m.Regex, IsEqual: !m.NotEqual})
	}
	var answer struct {
		SilenceID string `json:"silenceID"`
	}
	if err := am.do(ctx, http.MethodPost, "/api/v2/silences", body, &answer); err != nil {
		return "", err
	}
	if answer.SilenceID == "" {
		return "", fmt.Errorf("amtest: POST %s/api/v2/silences answered no silenceID", am.URL)
	}
	return answer.SilenceID, nil
}

// ExpireSilence ends the silence id now (DELETE /api/v2/silence/{id}); the alerts it held
// back are notified at the next flush of their group.
func (am *Alertmanager) ExpireSilence(ctx context.Context, id string) error {
	return am.do(ctx, http.MethodDelete, "/api/v2/silence/"+url.PathEscape(id), nil, nil)
}

// Status returns GET /api/v2/status: the cluster's state and peers, the version, the
// configuration.
func (am *Alertmanager) Status(ctx context.Context) (Status, error) {
	var st Status
	err := am.get(ctx, "/api/v2/status", &st)
	return st, err
}

func (am *Alertmanager) get(ctx context.Context, path string, out any) error {
	return am.do(ctx, http.MethodGet, path, nil, out)
}

// do sends body as JSON (if not nil) and decodes a 2xx answer into out (if not nil); any
// other answer is an error that carries it.
func (am *Alertmanager) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, am.URL+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := am.client.Do(req)
	if err != nil {
		return fmt.Errorf("amtest: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("amtest: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("amtest: %s %s%s: %s: %s", method, am.URL, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("amtest: %s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return nil
}
