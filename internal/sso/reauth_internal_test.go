package sso

import (
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// TestAuthenticatedAt: an ordinary sign-in keeps a plausible auth_time (one slightly ahead is
// now) and treats any other as unknown; a step-up requires one, not ahead beyond the skew,
// and not from before the sign-in began (the second it began counts, auth_time having whole
// seconds).
func TestAuthenticatedAt(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	unix := func(d time.Duration) float64 { return float64(now.Add(d).Unix()) }
	ordinary := store.OIDCLogin{StartedAt: now.Add(-30 * time.Second)}
	stepUp := store.OIDCLogin{StepUp: true, StartedAt: now.Add(-30 * time.Second)}
	tests := []struct {
		name  string
		claim any
		login store.OIDCLogin
		want  *time.Time
		err   error
	}{
		{"Ordinary", unix(-3 * time.Hour), ordinary, ptr(time.Unix(now.Add(-3*time.Hour).Unix(), 0)), nil},
		{"OrdinaryMissing", nil, ordinary, nil, nil},
		{"OrdinaryString", "1700000000", ordinary, nil, nil},
		{"OrdinaryZero", 0.0, ordinary, nil, nil},
		{"OrdinaryAheadWithinSkew", unix(30 * time.Second), ordinary, &now, nil},
		{"OrdinaryFuture", unix(time.Hour), ordinary, nil, nil},
		{"StepUp", unix(-10 * time.Second), stepUp, ptr(time.Unix(now.Add(-10*time.Second).Unix(), 0)), nil},
		{"StepUpMissing", nil, stepUp, nil, errAuthTimeMissing},
		{"StepUpFuture", unix(2 * time.Minute), stepUp, nil, errTokenRejected},
		{"StepUpBeforeStart", unix(-30*time.Second - authTimeSkew - time.Second), stepUp, nil, errReauthNotFresh},
		{"StepUpStartSecond", unix(-30*time.Second - authTimeSkew), stepUp,
			ptr(time.Unix(now.Add(-30*time.Second-authTimeSkew).Unix(), 0)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := authenticatedAt(tt.claim, tt.login, now)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err: got %v, want %v", err, tt.err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && !got.Equal(*tt.want)) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
