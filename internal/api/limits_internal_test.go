package api

import (
	"net/netip"
	"testing"
	"time"
)

// TestAddressLimiter: a bucket per address refills at the rate, and the limiter forgets the
// addresses seen least recently past its bound, so its memory stays bounded under a flood of
// addresses.
func TestAddressLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := newAddressLimiter(6, 3) // one sign-in every 10 s, 6 at once; 3 addresses remembered
	l.now = func() time.Time { return now }
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 6 {
		if _, ok := l.allow(a); !ok {
			t.Fatalf("sign-in %d of the burst: got refused, want allowed", i+1)
		}
	}
	retry, ok := l.allow(a)
	if ok || retry != 10*time.Second {
		t.Fatalf("past the burst: got %v, %v, want refused for 10s", ok, retry)
	}
	now = now.Add(10 * time.Second)
	if _, ok := l.allow(a); !ok {
		t.Fatalf("after 10s: got refused, want one more sign-in")
	}

	for i := range 1000 {
		l.allow(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}))
		if n := len(l.buckets); n > 3 || l.recent.Len() != n {
			t.Fatalf("after %d addresses: got %d buckets (%d in the list), want at most 3", i+1, n, l.recent.Len())
		}
	}
	// The drained address was forgotten: it starts again with a full bucket.
	if _, ok := l.allow(a); !ok {
		t.Fatalf("a forgotten address: got refused, want a full bucket")
	}

	off := newAddressLimiter(0, 3)
	for range 100 {
		if _, ok := off.allow(a); !ok {
			t.Fatalf("with no limit: got refused, want allowed")
		}
	}
	if len(off.buckets) != 0 {
		t.Fatalf("with no limit: got %d buckets, want none kept", len(off.buckets))
	}
}
