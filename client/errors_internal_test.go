package client

import (
	"net/http"
	"testing"
	"time"
)

func TestNewError(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		body       string
		want       Error
	}{
		{"JSON", 403, "", `{"error":"Already claimed.","code":"bootstrap_already_completed"}`,
			Error{Op: "op", Status: 403, Code: "bootstrap_already_completed", Message: "Already claimed."}},
		{"RetryAfterSeconds", 429, "17", `{"error":"Too many.","code":"rate_limited"}`,
			Error{Op: "op", Status: 429, Code: "rate_limited", Message: "Too many.", RetryAfter: 17 * time.Second}},
		{"NotJSON", 502, "", "<html>upstream secret-looking page</html>",
			Error{Op: "op", Status: 502, Message: "Bad Gateway"}},
		{"JSONWithoutError", 500, "", `{"other":1}`, Error{Op: "op", Status: 500, Message: "Internal Server Error"}},
		{"BadRetryAfter", 503, "soon", `{"error":"Down.","code":"unavailable"}`,
			Error{Op: "op", Status: 503, Code: "unavailable", Message: "Down."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
			if tt.retryAfter != "" {
				resp.Header.Set("Retry-After", tt.retryAfter)
			}
			if got := newError("op", resp, []byte(tt.body)); *got != tt.want {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	for v, want := range map[string][2]time.Duration{
		"":   {0, 0},
		"0":  {0, 0},
		"5":  {5 * time.Second, 5 * time.Second},
		"-3": {0, 0},
		"x":  {0, 0},
		past: {0, 0},
		date: {85 * time.Second, 91 * time.Second}, // the date has a one-second resolution
	} {
		if got := retryAfter(v); got < want[0] || got > want[1] {
			t.Errorf("retryAfter(%q): got %s, want within [%s, %s]", v, got, want[0], want[1])
		}
	}
}
