package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestIsConnError: what a failover throws at the store (a connection cut mid-query, a
// standby that refuses writes) is "unavailable", and what a bug or bad data throws is not.
func TestIsConnError(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ConnectionResetMidQuery", fmt.Errorf("find user: %w", reset), true},
		{"UnexpectedEOFMidQuery", fmt.Errorf("create session: %w", io.ErrUnexpectedEOF), true},
		{"ReadOnlyStandby", &pgconn.PgError{Code: "25006"}, true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"Deadline", context.DeadlineExceeded, true},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"InvalidText", &pgconn.PgError{Code: "22021"}, false},
		{"Cancelled", context.Canceled, false},
		{"Plain", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isConnError(tc.err); got != tc.want {
				t.Errorf("isConnError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
