package amtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptions_Config(t *testing.T) {
	whole := []byte("route: {receiver: x}\nreceivers: [{name: x}]\n")
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"Built", Options{WebhookURL: "http://127.0.0.1:1/"}, ""},
		{"WholeFile", Options{Config: whole, PeerTimeout: time.Second}, ""},
		{"ErrNoURL", Options{}, "WebhookURL is required"},
		{"ErrEmptyFile", Options{Config: []byte{}}, "Config is empty"},
		{"ErrFileAndURL", Options{Config: whole, WebhookURL: "http://127.0.0.1:1/"}, "leave WebhookURL"},
		{"ErrFileAndInterval", Options{Config: whole, RepeatInterval: time.Second}, "leave WebhookURL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.withDefaults().config()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
			case tt.opts.Config != nil && err == nil && string(got) != string(tt.opts.Config):
				t.Errorf("got %q, want the file as given %q", got, tt.opts.Config)
			}
		})
	}
}

// TestStart_Config runs a whole file of the test's: its receiver's own name and settings
// reach the webhook, with nothing of Options' building in between.
func TestStart_Config(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	credentials := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(credentials, []byte("from-a-whole-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`route:
  receiver: own-name
  group_by: [alertname, cluster]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 1h
receivers:
  - name: own-name
    webhook_configs:
      - url: %s
        max_alerts: 1
        http_config:
          authorization:
            credentials_file: %s
`, rec.URL, credentials)
	am := Start(t, Options{Config: []byte(config)})
	st, err := am.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Config.Original, "own-name") {
		t.Errorf("status: got configuration %q, want the file's receiver own-name", st.Config.Original)
	}
	alerts := []Alert{
		{Labels: map[string]string{"alertname": "Whole", "cluster": "c1", "instance": "a"}},
		{Labels: map[string]string{"alertname": "Whole", "cluster": "c1", "instance": "b"}},
	}
	if err := am.PostAlerts(testCtx(t), alerts); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, "of group Whole/c1", func(n notification) bool { return n.GroupLabels["cluster"] == "c1" })
	n := got.Notice
	if n.Receiver != "own-name" || n.GroupKey != `{}:{alertname="Whole", cluster="c1"}` || len(n.Alerts) != 1 || n.TruncatedAlerts != 1 {
		t.Errorf("got receiver %q, groupKey %q, %d alerts and truncatedAlerts %d; want own-name, %q, 1 and 1",
			n.Receiver, n.GroupKey, len(n.Alerts), n.TruncatedAlerts, `{}:{alertname="Whole", cluster="c1"}`)
	}
	if got.Auth != "Bearer from-a-whole-file" {
		t.Errorf("Authorization: got %q, want the file's credentials", got.Auth)
	}
}

// TestStartClusterEach gives each peer its own receiver: each notifies its own recorder.
func TestStartClusterEach(t *testing.T) {
	t.Parallel()
	recs := []*recorder{newRecorder(t), newRecorder(t)}
	ams := StartClusterEach(t, Options{WebhookURL: recs[0].URL}, Options{WebhookURL: recs[1].URL})
	for i, am := range ams {
		name := fmt.Sprintf("OnlyOn%d", i)
		if err := am.PostAlerts(testCtx(t), []Alert{{Labels: map[string]string{"alertname": name}}}); err != nil {
			t.Fatal(err)
		}
		got := recs[i].wait(t, name, func(n notification) bool { return n.GroupLabels["alertname"] == name })
		if got.Notice.ExternalURL != am.URL {
			t.Errorf("%s: notified by %s, want %s", name, got.Notice.ExternalURL, am.URL)
		}
	}
	for i, rec := range recs {
		for _, r := range rec.all() {
			if want := fmt.Sprintf("OnlyOn%d", i); r.Notice.GroupLabels["alertname"] != want {
				t.Errorf("recorder %d: got a notification of %v, want only %s's", i, r.Notice.GroupLabels, want)
			}
		}
	}
	assertLoopbackOnly(t, ams...)
}
