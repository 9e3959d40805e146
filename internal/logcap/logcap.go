// Package logcap bounds what callers of terdut-server can put into its log: the length of a
// value they sent (a key ID, a subject, a path, a username), and how many lines a flood of
// refused requests writes. Metrics keep the exact counts; the log keeps enough to act on.
package logcap

import (
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxBytes is how much of a caller's value a log line quotes.
const MaxBytes = 128

// String returns s cut to MaxBytes (see Cut).
func String(s string) string { return Cut(s, MaxBytes) }

// Cut returns s as valid UTF-8 of at most n bytes of its own, cut at a character boundary;
// a value that was cut ends with a marker saying how long it was, so that a reader knows it
// is not whole. Invalid bytes become U+FFFD.
func Cut(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	cut := s
	if len(s) > n {
		// Cut before a character that the limit would split, not through it.
		i := n
		for k := 1; k < utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]); k++ {
			i--
		}
		cut = s[:i]
	}
	cut = strings.ToValidUTF8(cut, "\uFFFD")
	if len(s) <= n {
		return cut
	}
	return cut + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// Limiter lets at most one line a period through and counts the lines it held back, for
// messages that anyone can cause once per request. It is safe for concurrent use.
type Limiter struct {
	period time.Duration
	clock  func() time.Time // nil: time.Now; a test's clock

	mu         sync.Mutex
	next       time.Time // when the next line may go out
	suppressed int
}

// NewLimiter returns a Limiter letting one line through each period.
func NewLimiter(period time.Duration) *Limiter { return &Limiter{period: period} }

// Allow reports whether a line may be written now and, when it may, how many were held
// back since the last one written (say so in the line).
func (l *Limiter) Allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.clock != nil {
		now = l.clock()
	}
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	l.next = now.Add(l.period)
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// PerKey is a Limiter for each key of a small fixed set (such as a metric's reasons), so that
// a flood of one kind of line does not hide the lines of another. It is safe for concurrent
// use; give it only keys from a fixed set, never a caller's value.
type PerKey struct {
	period time.Duration

	mu sync.Mutex
	m  map[string]*Limiter
}

// NewPerKey returns a PerKey letting one line of each key through each period.
func NewPerKey(period time.Duration) *PerKey {
	return &PerKey{period: period, m: map[string]*Limiter{}}
}

// Allow is Limiter.Allow for key.
func (p *PerKey) Allow(key string) (ok bool, suppressed int) {
	p.mu.Lock()
	l := p.m[key]
	if l == nil {
		l = NewLimiter(p.period)
		p.m[key] = l
	}
	p.mu.Unlock()
	return l.Allow()
}
