package logcap_test

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"Short", "kid-1", 8, "kid-1"},
		{"Exact", "abcdefgh", 8, "abcdefgh"},
		{"Long", "abcdefghij", 8, "abcdefgh…(10 bytes)"},
		{"SplitCharacter", "abcdefgé", 8, "abcdefg…(9 bytes)"},         // é is two bytes: not cut in half
		{"SplitFourBytes", "abcdef\U0001F600", 8, "abcdef…(10 bytes)"}, // an emoji is four
		{"InvalidShort", "a\xffb", 8, "a\uFFFDb"},
		{"InvalidLong", "\xff\xff\xff\xff\xff\xff\xff\xff\xff", 4, "\uFFFD…(9 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := logcap.Cut(tt.in, tt.n); got != tt.want {
				t.Errorf("Cut(%q, %d): got %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
	t.Run("Bounded", func(t *testing.T) {
		for _, in := range []string{strings.Repeat("k", 16<<10), strings.Repeat("é", 8<<10), strings.Repeat("\xf0\x9f", 8<<10)} {
			got := logcap.String(in)
			if !utf8.ValidString(got) || len(got) > logcap.MaxBytes+len("…(99999 bytes)") || !strings.Contains(got, "bytes)") {
				t.Errorf("String of %d bytes: got %d bytes %q, want valid UTF-8 of at most %d bytes and the marker", len(in), len(got), got, logcap.MaxBytes)
			}
		}
	})
}

func TestLimiter(t *testing.T) {
	t.Run("OneLineAPeriod", func(t *testing.T) {
		l := logcap.NewLimiter(time.Hour)
		var mu sync.Mutex
		allowed := 0
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() {
				if ok, _ := l.Allow(); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if allowed != 1 {
			t.Fatalf("lines let through: got %d, want 1 of 1000 within the period", allowed)
		}
	})
	t.Run("CountsTheHeldBack", func(t *testing.T) {
		// The limiter reads the test's clock: how long the calls take on a busy machine
		// decides nothing.
		const period = 500 * time.Millisecond
		l := logcap.NewLimiter(period)
		now := time.Now()
		logcap.SetClock(l, func() time.Time { return now })
		if ok, n := l.Allow(); !ok || n != 0 {
			t.Fatalf("first: got %v, %d, want true, 0", ok, n)
		}
		start := now
		for i := range 7 {
			now = start.Add(period * time.Duration(i) / 7) // the first at once
			if i == 6 {
				now = start.Add(period - time.Nanosecond) // the last instant of the period
			}
			if ok, _ := l.Allow(); ok {
				t.Fatalf("within the period, at %s: got a line let through, want held back", now.Sub(start))
			}
		}
		now = start.Add(period) // the period is over
		if ok, n := l.Allow(); !ok || n != 7 {
			t.Fatalf("after the period: got %v, %d, want true and the 7 held back", ok, n)
		}
		if ok, _ := l.Allow(); ok {
			t.Fatal("at once after a line: got another let through, want held back")
		}
	})
}

func TestPerKey(t *testing.T) {
	p := logcap.NewPerKey(time.Hour)
	seen := map[string]bool{}
	for _, key := range []string{"malformed", "audience", "malformed", "audience", "malformed"} {
		if ok, _ := p.Allow(key); ok != !seen[key] {
			t.Errorf("%s: got allowed %v, want %v (one line of each key a period)", key, ok, !seen[key])
		}
		seen[key] = true
	}
}
