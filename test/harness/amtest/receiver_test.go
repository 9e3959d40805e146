package amtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitBound bounds each wait for a notification: generous for a busy 2-core machine, never
// a measure of speed.
const waitBound = 90 * time.Second

// notification is the webhook's body (version 4).
type notification struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	// NotificationReason (v0.35.0) says why Alertmanager sent it: "first notification",
	// "new alerts added", "some alerts resolved", "all alerts resolved", "repeat interval
	// elapsed".
	NotificationReason string            `json:"notification_reason"`
	RouteLabels        map[string]string `json:"routeLabels"`
	Alerts             []WebhookAlert    `json:"alerts"`
}

// received is one request the recorder took.
type received struct {
	At     time.Time
	Auth   string // the Authorization header
	Body   []byte
	Notice notification
}

// recorder is a webhook receiver on 127.0.0.1 that keeps every notification and answers 200.
type recorder struct {
	URL string

	mu  sync.Mutex
	got []received
}

func newRecorder(tb testing.TB) *recorder {
	tb.Helper()
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		rec := received{At: time.Now(), Auth: req.Header.Get("Authorization"), Body: body}
		if err == nil {
			err = json.Unmarshal(body, &rec.Notice)
		}
		if err != nil || req.Method != http.MethodPost {
			tb.Errorf("recorder: %s %s: %v: %q", req.Method, req.URL, err, body)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, rec)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	}))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// all returns what was received so far.
func (r *recorder) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// wait polls until a notification satisfies ok and returns the first that does, or fails tb
// after waitBound with every notification received.
func (r *recorder) wait(tb testing.TB, what string, ok func(notification) bool) received {
	tb.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		got := r.all()
		for _, rec := range got {
			if ok(rec.Notice) {
				return rec
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, rec := range got {
				fmt.Fprintf(&b, "  %s %s\n", rec.At.Format(time.RFC3339Nano), rec.Body)
			}
			tb.Fatalf("no notification %s within %v; got %d:\n%s", what, waitBound, len(got), b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
