package api

import (
	"container/list"
	"context"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits on what anonymous callers can make one replica do. They live in this process's memory,
// unlike the guessing limit (which is per username, in the database): they bound resources of a
// replica, not secrets, so each replica bounding its own is enough.

var (
	errAddressRateLimited = &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "Too many sign-ins from your address; try again later."}
	errOverloaded = &apiError{Status: http.StatusServiceUnavailable, Code: "overloaded",
		Message: "Too many passwords are being checked right now; try again in a moment.", RetryAfter: time.Second}
)

// maxTrackedAddresses bounds the memory of the per-address limiter: past it, the addresses
// seen least recently are forgotten (about 100 bytes each).
const maxTrackedAddresses = 50_000

// addressLimiter is a token bucket per client address: perMinute sign-ins a minute, as many at
// once. IPv6 addresses are counted by their /64, which one client usually holds whole.
type addressLimiter struct {
	perMinute int // 0: no limit
	max       int
	now       func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*list.Element // of *bucket
	recent  list.List                    // most recently used first
}

type bucket struct {
	addr   netip.Addr
	tokens float64
	at     time.Time
}

func newAddressLimiter(perMinute, max int) *addressLimiter {
	return &addressLimiter{perMinute: perMinute, max: max, now: time.Now, buckets: map[netip.Addr]*list.Element{}}
}

// allow takes a token for addr; without one it returns how long until there is one.
func (l *addressLimiter) allow(addr netip.Addr) (time.Duration, bool) {
	if l.perMinute <= 0 {
		return 0, true
	}
	if addr.Is6() {
		addr = netip.PrefixFrom(addr, 64).Masked().Addr()
	}
	now := l.now()
	rate, burst := float64(l.perMinute)/60, float64(l.perMinute) // tokens a second, and at most
	l.mu.Lock()
	defer l.mu.Unlock()
	var b *bucket
	if e, ok := l.buckets[addr]; ok {
		l.recent.MoveToFront(e)
		b = e.Value.(*bucket)
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
		b.at = now
	} else {
		if l.recent.Len() >= l.max {
			// Forgetting an address hands it a full bucket: the price of a bounded memory.
			oldest := l.recent.Back()
			delete(l.buckets, oldest.Value.(*bucket).addr)
			l.recent.Remove(oldest)
		}
		b = &bucket{addr: addr, tokens: burst, at: now}
		l.buckets[addr] = l.recent.PushFront(b)
	}
	if b.tokens < 1 {
		return time.Duration(math.Ceil((1 - b.tokens) / rate * float64(time.Second))), false
	}
	b.tokens--
	return 0, true
}

// clientAddr returns the address a request came from: its peer's, unless the peer is a trusted
// proxy; then the client that the header the trusted proxies write (Options.ForwardedHeader)
// names (forwardedClient), or the peer's own when the request does not have it (the proxy's own
// request). The other forwarding headers are never read here: a proxy passes on, untouched,
// those it does not write, so they are the client's word. When the header names no client, it
// returns the zero Addr, never the proxy's: such requests share one bucket of the per-address
// limit, and logs and audit rows say "unknown" (clientName).
func (s *server) clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not over TCP: every such caller shares one bucket
	}
	addr := ap.Addr().Unmap()
	if !s.trustedProxy(addr) || !sentHeader(r.Header, s.opts.ForwardedHeader) {
		return addr
	}
	client, _ := forwardedClient(r.Header, s.opts.ForwardedHeader, s.trustedProxy)
	return client
}

// clientName is clientAddr as logs and audit rows show it: "unknown" when no client is named.
func (s *server) clientName(r *http.Request) string {
	if a := s.clientAddr(r); a.IsValid() {
		return a.String()
	}
	return "unknown"
}

func (s *server) trustedProxy(addr netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// allowAddress applies the per-address sign-in rate to r; it returns the error to answer with,
// or nil. A refusal is answered after a pause (AddressRefusalPause, or until the address's next
// sign-in is due, if sooner; less if the client goes): an address that floods gets at most one
// answer a pause on each connection, so its refusals cannot take the replica's cores from the
// sign-ins of everyone else. A pause costs a waiting goroutine, which the connection has anyway.
func (s *server) allowAddress(r *http.Request, method string) error {
	retry, ok := s.addresses.allow(s.clientAddr(r))
	if ok {
		return nil
	}
	s.metrics.signinRefused.WithLabelValues(method, "address_rate_limited").Inc()
	pause := time.NewTimer(min(retry, s.opts.AddressRefusalPause))
	defer pause.Stop()
	select {
	case <-pause.C:
	case <-r.Context().Done():
	}
	e := *errAddressRateLimited
	e.RetryAfter = retry
	return &e
}

// checkSlots bounds the password checks (bcrypt, by design CPU-heavy) running at once on this
// replica. A check that finds none free waits briefly for one, in a bounded queue; then it is
// refused at once, so a flood costs its callers fast refusals and the replica no more than its
// cores, instead of making every sign-in wait.
type checkSlots struct {
	slots      chan struct{}
	wait       time.Duration
	maxWaiting int64
	waiting    atomic.Int64
	inFlight   prometheus.Gauge
	refused    prometheus.Counter
}

func newCheckSlots(n int, wait time.Duration, reg prometheus.Registerer) *checkSlots {
	c := &checkSlots{slots: make(chan struct{}, n), wait: wait, maxWaiting: int64(32 * n),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "terdut_password_checks_in_flight",
			Help: "Password checks (bcrypt) running now on this replica."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "terdut_password_checks_refused_total",
			Help: "Password checks refused with 503 overloaded: no check slot was free in time."})}
	reg.MustRegister(c.inFlight, c.refused)
	return c
}

// acquire takes a slot, waiting at most c.wait; it reports whether it got one.
func (c *checkSlots) acquire(ctx context.Context) bool {
	select {
	case c.slots <- struct{}{}:
		c.inFlight.Inc()
		return true
	default:
	}
	if c.waiting.Add(1) > c.maxWaiting {
		c.waiting.Add(-1)
		return false
	}
	defer c.waiting.Add(-1)
	t := time.NewTimer(c.wait)
	defer t.Stop()
	select {
	case c.slots <- struct{}{}:
		c.inFlight.Inc()
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (c *checkSlots) release() {
	c.inFlight.Dec()
	<-c.slots
}

// checkPassword checks password against hash (see Passwords.Check) in a check slot. It returns
// errOverloaded, having checked nothing, when no slot is free in time, or the context's error
// when the client went while it waited. A refusal is expected back-pressure, not a failure:
// it is counted, and logged at most once a second on this replica, with how many it stands for.
func (s *server) checkPassword(ctx context.Context, hash, password string) (bool, error) {
	if !s.checks.acquire(ctx) {
		return false, s.slotRefused(ctx)
	}
	defer s.checks.release()
	return s.passwords.Check(hash, password), nil
}

// slotRefused is the answer to a request that found no check slot free in time: the context's
// error when the client went while it waited, else errOverloaded, counted and logged at most
// once a second on this replica, with how many refusals the line stands for.
func (s *server) slotRefused(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.checks.refused.Inc()
	if ok, held := s.overloadLog.Allow(); ok {
		s.log.WarnContext(ctx, "password checks overloaded: refusing sign-ins with 503 overloaded (logged at most once a second)",
			"password_checks", s.opts.PasswordChecks, "refused_since_last_line", held+1)
	}
	return errOverloaded
}

// hashPassword hashes password (see Passwords.Hash) in a check slot: a hash costs what a check
// does, so setting passwords shares the same bound on this replica's cores. With no slot free
// in time it hashes nothing and answers as checkPassword does (slotRefused): the refusal is
// counted like a check's, and a client that went is not answered 503.
func (s *server) hashPassword(ctx context.Context, password string) (string, error) {
	if !s.checks.acquire(ctx) {
		return "", s.slotRefused(ctx)
	}
	defer s.checks.release()
	return s.passwords.Hash(password)
}
