package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestOpen_PingsOnlyLongIdleConnections checks the pool's liveness check: pgx by default
// pings every connection idle for a second before handing it out, a second round trip for
// most requests of a lightly used server; the store pings only after a quiet spell.
func TestOpen_PingsOnlyLongIdleConnections(t *testing.T) {
	should := mustStore(t).Pool().Config().ShouldPing
	if should == nil {
		t.Fatal("ShouldPing: got nil (pgx's default, a ping after 1s idle), want the store's")
	}
	tests := []struct {
		idle time.Duration
		want bool
	}{
		{0, false},
		{1500 * time.Millisecond, false},
		{10 * time.Second, false},
		{16 * time.Second, true},
		{time.Minute, true},
	}
	for _, tt := range tests {
		if got := should(context.Background(), pgxpool.ShouldPingParams{IdleDuration: tt.idle}); got != tt.want {
			t.Errorf("ping a connection idle for %s: got %v, want %v", tt.idle, got, tt.want)
		}
	}
}
