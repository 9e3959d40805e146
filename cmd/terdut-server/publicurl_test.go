package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestSecureOrLoopbackPublicURL(t *testing.T) {
	tests := []struct {
		url  string
		want bool
	}{
		{"https://terdut.example.com", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://127.0.0.1:8080", true},
		{"http://127.1.2.3", true},
		{"http://[::1]:8080", true},
		{"http://terdut.example.com", false},
		{"http://10.0.0.7:8080", false},
		{"http://localhost.example.com", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := secureOrLoopbackPublicURL(u); got != tt.want {
			t.Errorf("secureOrLoopbackPublicURL(%s): got %v, want %v", tt.url, got, tt.want)
		}
	}
}

// TestServe_WarnsOfPlainHTTPSingleSignOn: single sign-on behind a plain-http public URL off
// loopback starts, but says at start that its state cookie cannot be __Host- prefixed; the
// same settings on loopback or https say nothing of it.
func TestServe_WarnsOfPlainHTTPSingleSignOn(t *testing.T) {
	const warning = "single sign-on over plain http off loopback"
	for _, tt := range []struct {
		publicURL string
		warns     bool
	}{
		{"http://terdut.test:8080", true},
		{"http://localhost:8080", false},
		{"https://terdut.test", false},
	} {
		t.Run(tt.publicURL, func(t *testing.T) {
			// The issuer is a closed loopback port: discovery fails in the background, and the
			// server starts all the same.
			srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
				"TERDUT_OIDC_ISSUER": "http://127.0.0.1:1", "TERDUT_OIDC_CLIENT_ID": "terdut",
				"TERDUT_OIDC_CLIENT_SECRET": "client-secret-in-a-test", "TERDUT_PUBLIC_URL": tt.publicURL})
			if err := srv.stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			logged := srv.Stderr.String()
			if got := strings.Contains(logged, warning); got != tt.warns {
				t.Errorf("the start's log warns of plain-http single sign-on: got %v, want %v; stderr:\n%s", got, tt.warns, logged)
			}
			if strings.Contains(logged, "client-secret-in-a-test") {
				t.Errorf("the client secret reached the log:\n%s", logged)
			}
		})
	}
}
