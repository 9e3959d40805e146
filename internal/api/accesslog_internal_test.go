package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // TestLogTime_AsFormat's daylight saving time

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// TestAccessLine_AsSlog: the access line built by hand is the line slog's JSON handler wrote
// for the same request, byte for byte, so that what reads the log reads the same lines.
func TestAccessLine_AsSlog(t *testing.T) {
	zone := time.FixedZone("", -(3*3600 + 30*60))
	for _, c := range []struct {
		name, method, route, id, clientID string
		at                                time.Time
		status                            int
		took                              time.Duration
		user                              int64
	}{
		{"OK", "GET", "/api/me", "1a2b3c4d-1", "", time.Date(2026, 12, 1, 14, 5, 6, 123456789, time.UTC), 200, 1234567 * time.Nanosecond, 42},
		{"ClientID", "POST", "/api/bootstrap", "9f1c2b7e-1", "the-client's \"id\"", time.Date(2026, 1, 2, 3, 4, 5, 0, zone), 201, 2 * time.Millisecond, 1},
		{"Whole", "POST", "/api/bootstrap", "9f1c2b7e-client-id", "", time.Date(2026, 1, 2, 3, 4, 5, 0, zone), 201, 2 * time.Millisecond, 1},
		{"Zero", "DELETE", "unmatched", "x", "", time.Date(2026, 12, 1, 0, 0, 0, 100, time.UTC), 404, 0, 0},
		{"SubMicrosecond", "GET", "/healthz", "a", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 200, 999, 0},
		{"Long", "GET", "/api/users", "a/b+c=d:e.f_g", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 500, 3*time.Hour + 7*time.Microsecond, 1 << 40},
		{"Escapes", "M&<>\"\\\b\f\n\r\t\x01\x7f", "/x", "i", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 405, time.Second, 7},
		{"Unicode", "é\u2028\u2029\xff日", "/x", "i", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 400, time.Millisecond, 7},
		{"Cut", strings.Repeat("Ü", 100), "/x", "i", "", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 400, time.Millisecond, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			method := logcap.String(c.method)
			var want bytes.Buffer
			r := slog.NewRecord(c.at, slog.LevelInfo, "request", 0)
			r.AddAttrs(slog.String("method", method), slog.String("route", c.route), slog.Int("status", c.status),
				slog.Float64("duration_ms", float64(c.took.Microseconds())/1000), slog.Int64("user_id", c.user),
				slog.String("request_id", c.id))
			if c.clientID != "" {
				r.AddAttrs(slog.String("client_request_id", c.clientID))
			}
			if err := slog.NewJSONHandler(&want, nil).Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			got := appendAccessLine(nil, c.at, method, c.route, c.status, c.took, c.user, c.id, c.clientID)
			if string(got) != want.String() {
				t.Errorf("got  %s\nwant %s", got, want.Bytes())
			}
		})
	}
}

// TestAppendMilliseconds: a duration is written as encoding/json writes its milliseconds to the
// microsecond as a float64, which is what slog wrote.
func TestAppendMilliseconds(t *testing.T) {
	us := []int64{0, 1, 9, 10, 99, 100, 101, 110, 999, 1000, 1001, 1010, 1100, 1234, 9999, 10000, 123456, 1e6 + 1,
		86_400_000_000, 999_999_999_999_999, 1e15, 1e15 + 7, -1, -1500}
	for i := int64(1); i < 2e15; i = i*7 + 3 {
		us = append(us, i)
	}
	for _, u := range us {
		// Odd ones with nanoseconds, which the line leaves out.
		took := time.Duration(u)*time.Microsecond + 999*time.Nanosecond*time.Duration(u&1)
		want, err := json.Marshal(float64(took.Microseconds()) / 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMilliseconds(nil, took); string(got) != string(want) {
			t.Errorf("%dµs: got %s, want %s", u, got, want)
		}
	}
}

// TestRequestIDs_Unique: ids given out at once by many goroutines, across garbage collections
// that drop the processors' blocks, are all different and all carry the replica's prefix.
func TestRequestIDs_Unique(t *testing.T) {
	ids := newRequestIDs()
	const goroutines, each = 16, 5000
	got := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if i%1000 == 0 && g == 0 {
					runtime.GC()
				}
				got[g] = append(got[g], ids.next())
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, goroutines*each)
	for _, list := range got {
		for _, id := range list {
			if seen[id] || !strings.HasPrefix(id, ids.prefix) || len(id) <= len(ids.prefix) {
				t.Fatalf("id %q: given twice, or not this replica's (prefix %q)", id, ids.prefix)
			}
			seen[id] = true
		}
	}
	if other := newRequestIDs(); other.prefix == ids.prefix {
		t.Errorf("two replicas drew the same prefix %q", ids.prefix)
	}
}

// TestLogTime_AsFormat: an access line's time is what AppendFormat writes with RFC 3339 and
// nanoseconds (slog's form), whether its second is the last line's or not: across years,
// fractions, zones of any offset and a change of daylight saving time, from goroutines that
// change the second kept under each other.
func TestLogTime_AsFormat(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin") // time/tzdata is linked into the test
	if err != nil {
		t.Fatal(err)
	}
	zones := []*time.Location{time.UTC, time.Local, berlin, time.FixedZone("", 0),
		time.FixedZone("east", 5*3600+30*60), time.FixedZone("west", -(3*3600 + 1234))}
	var times []time.Time
	for _, sec := range []int64{0, -1, 1, 1798761600, 1774746000 - 1, 1774746000, 1792890000, 253402300799, 253402300800, -62135596800} {
		for _, ns := range []int{0, 1, 10, 100000, 123456789, 999999999, 500000000} {
			times = append(times, time.Unix(sec, int64(ns)))
		}
	}
	// Each goroutine goes through the times in one zone after another: seven times a second
	// in a row (the second kept serves six), then the next second, while the others change
	// the second kept under it.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 20 {
				for z := range zones {
					zone := zones[(z+g+round)%len(zones)]
					for _, at := range times {
						at := at.In(zone)
						if got, want := appendLogTime(nil, at), at.AppendFormat(nil, time.RFC3339Nano); string(got) != string(want) {
							t.Errorf("%v: got %s, want %s", at, got, want)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	now := time.Now() // a time with a monotonic reading, as the handler's is
	for range 3 {
		if got, want := appendLogTime(nil, now), now.AppendFormat(nil, time.RFC3339Nano); string(got) != string(want) {
			t.Fatalf("now: got %s, want %s", got, want)
		}
	}
}
