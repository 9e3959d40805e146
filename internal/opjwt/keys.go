package opjwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/secretfile"
)

// maxDocBytes bounds the discovery document and the JWKS read from the issuer.
const maxDocBytes = 1 << 20

// maxKeyAge is how long keys are used before they are fetched again.
const maxKeyAge = time.Hour

// keySet is the issuer's signing keys, fetched through its discovery document and
// refetched when a token names a key it does not hold, at most once per MinRefresh (a token
// of a key not held within MinRefresh of the last read is ErrKeyNotYetRead, not refused). No lock
// is held across a fetch: the keys are read from an atomic pointer, so a token of a known key
// never waits for one, however long the issuer takes to answer.
type keySet struct {
	cfg   Config
	now   func() time.Time         // time.Now; a test's clock
	state atomic.Pointer[keyState] // never nil

	mu     sync.Mutex    // guards flight alone, never held across a fetch
	flight chan struct{} // closed when the fetch in progress ends; nil when none is
}

// keyState is what the last fetch left: replaced whole, never changed.
type keyState struct {
	jwksURL   string // from the discovery document; "" until read, or after a failure
	keys      []jose.JSONWebKey
	lastFetch time.Time // the end of the last try, successful or not
	lastErr   error     // of the last try: while it is recent, a key not held is the issuer's outage, not the token's fault
}

func newKeySet(cfg Config) *keySet {
	ks := &keySet{cfg: cfg, now: time.Now}
	ks.state.Store(&keyState{})
	return ks
}

// joinWait bounds how long a token whose key is not held waits for a fetch in progress:
// past it the issuer is unavailable for this request (the operator retries), and the fetch
// goes on for the next ones.
const joinWait = 2 * time.Second

// lookup returns the issuer's keys that may have signed a token with this kid and alg:
// those with the kid (every key when the token names none). When it holds none it refetches
// the JWKS, unless it tried less than MinRefresh ago; keys older than maxKeyAge are
// refetched too (so that a key the issuer dropped stops being trusted), in the background
// and kept while the issuer cannot be reached.
func (ks *keySet) lookup(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	st := ks.state.Load()
	found, fetch, err := st.cached(kid, alg, ks.cfg.MinRefresh, ks.now())
	if !fetch {
		return found, err
	}
	done := ks.refreshAfter(st)
	if len(found) > 0 { // stale keys: good until the fetch says otherwise
		return found, nil
	}
	t := time.NewTimer(joinWait)
	defer t.Stop()
	select {
	case <-done:
		return ks.state.Load().answer(kid, alg)
	case <-t.C:
		return nil, fmt.Errorf("%w: the issuer has not answered within %s", ErrUnavailable, joinWait)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

// answer is the keys for kid and alg after a fetch: none held means the issuer's outage if
// the fetch failed, else the token's unknown key.
func (st *keyState) answer(kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	if found := matching(st.keys, kid, alg); len(found) > 0 {
		return found, nil
	}
	if st.lastErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, st.lastErr)
	}
	return nil, refuse(ReasonUnknownKey, "the issuer has no key %q for %s", logcap.String(kid), alg)
}

// fetchTimeout bounds one read of the discovery document and the JWKS.
const fetchTimeout = 10 * time.Second

// refreshAfter starts a fetch of the keys unless one is in progress or one ended since seen
// was read, and returns a channel closed when the keys newer than seen are there.
func (ks *keySet) refreshAfter(seen *keyState) <-chan struct{} {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.flight != nil {
		return ks.flight
	}
	if ks.state.Load() != seen {
		return closed
	}
	done := make(chan struct{})
	ks.flight = done
	go ks.refresh(seen, done)
	return done
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// refresh fetches the JWKS and, when that works, holds its keys, then closes done. The fetch
// has its own deadline and no request's context: its outcome is every request's until the
// next try, so a client that hangs up must not make it an issuer's failure. The token file is
// read here, outside any lock, so a slow or odd file holds up only the fetch.
func (ks *keySet) refresh(old *keyState, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	next := &keyState{jwksURL: old.jwksURL, keys: old.keys}
	next.jwksURL, next.lastErr = ks.fetch(ctx, ks.authToken(), next)
	next.lastFetch = ks.now()
	if next.lastErr != nil {
		ks.cfg.Logger.WarnContext(ctx, "cannot read the operator identity issuer's keys", "issuer", ks.cfg.Issuer, "err", next.lastErr)
	} else {
		ks.cfg.Logger.InfoContext(ctx, "read the operator identity issuer's keys", "issuer", ks.cfg.Issuer, "keys", len(next.keys))
	}
	ks.state.Store(next)
	ks.mu.Lock()
	ks.flight = nil
	ks.mu.Unlock()
	close(done)
}

// warm fetches the keys ahead of the first token, so that a wrong issuer, CA or token file
// can be reported at start rather than at the operator's first claim.
func (ks *keySet) warm(ctx context.Context) error {
	done := ks.refreshAfter(ks.state.Load())
	select {
	case <-done:
		return ks.state.Load().lastErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cached returns the held keys for kid and alg, and whether they must be fetched (with the
// keys to fall back on) at now; when not, found and err are the answer.
func (st *keyState) cached(kid string, alg jose.SignatureAlgorithm, minRefresh time.Duration, now time.Time) (found []jose.JSONWebKey, fetch bool, err error) {
	found = matching(st.keys, kid, alg)
	age := now.Sub(st.lastFetch)
	if len(found) > 0 && age < maxKeyAge {
		return found, false, nil
	}
	if age < minRefresh {
		if st.lastErr != nil {
			return nil, false, fmt.Errorf("%w: the last try failed less than %s ago: %v", ErrUnavailable, minRefresh, st.lastErr)
		}
		// Refusing here (401) would tell the operator, whose first token after a rotation a
		// flood of unknown kids can land here, that its token is wrong: it backs off long.
		// The key may be new; only a read made for it can say it is not there.
		return nil, false, fmt.Errorf("%w: %w: no key %q for %s in the keys read %s ago; they are read again at most once per %s",
			ErrUnavailable, ErrKeyNotYetRead, logcap.String(kid), alg, age.Round(time.Millisecond), minRefresh)
	}
	return found, true, nil
}

// matching returns the keys fit to check a signature of alg made with kid.
func matching(keys []jose.JSONWebKey, kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == string(alg)) && keyFits(k, alg) {
			out = append(out, k)
		}
	}
	return out
}

// keyFits reports whether k is a public key of the kind alg signs with: RSA of 2048 bits or
// more for RS256, P-256 for ES256.
func keyFits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return alg == jose.RS256 && pub.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jose.ES256 && pub.Curve == elliptic.P256()
	}
	return false
}

// fetch reads the discovery document (once, and again after a failure) and then the JWKS
// into next.keys; it returns the JWKS URL to use next time ("" after a failure).
func (ks *keySet) fetch(ctx context.Context, auth bearer, next *keyState) (string, error) {
	jwksURL := next.jwksURL
	if jwksURL == "" {
		u, err := ks.discover(ctx, auth)
		if err != nil {
			return "", err
		}
		jwksURL = u
	}
	var set jose.JSONWebKeySet
	// The API server refuses a request for application/json alone (406): its key set is
	// application/jwk-set+json.
	if err := ks.getJSON(ctx, jwksURL, "application/jwk-set+json, application/json", auth, &set); err != nil {
		return "", err
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.IsPublic() && (k.Use == "" || k.Use == "sig") {
			keys = append(keys, k)
		}
	}
	next.keys = keys
	return jwksURL, nil
}

// discover reads the issuer's discovery document and returns where to read its keys: the
// JWKSURL configured; else discovery's jwks_uri on the issuer's own origin; else that path
// on the issuer's origin (see Config.JWKSURL).
func (ks *keySet) discover(ctx context.Context, auth bearer) (string, error) {
	if ks.cfg.JWKSURL != "" {
		return ks.cfg.JWKSURL, nil
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	discovery := strings.TrimSuffix(ks.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	if err := ks.getJSON(ctx, discovery, "application/json", auth, &doc); err != nil {
		return "", err
	}
	if doc.Issuer != ks.cfg.Issuer && !slices.Contains(ks.cfg.OtherIssuers, doc.Issuer) {
		return "", fmt.Errorf("the discovery document names the issuer %q, want %q", logcap.String(doc.Issuer),
			strings.Join(append([]string{ks.cfg.Issuer}, ks.cfg.OtherIssuers...), " or "))
	}
	u, err := url.Parse(doc.JWKSURI)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("the discovery document's jwks_uri %q is not an absolute URL", logcap.String(doc.JWKSURI))
	}
	issuer, _ := url.Parse(ks.cfg.Issuer) // checked by New
	if SameOrigin(issuer, u) {
		return u.String(), nil
	}
	onIssuer := &url.URL{Scheme: issuer.Scheme, Host: issuer.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	ks.cfg.Logger.InfoContext(ctx, "the operator identity issuer's discovery names its keys on another origin; reading them at the same path on the issuer's own",
		"issuer", ks.cfg.Issuer, "jwks_uri", logcap.String(doc.JWKSURI), "reading", onIssuer.String())
	return onIssuer.String(), nil
}

// SameOrigin reports whether a and b have the same scheme, host and port (a missing port is
// the scheme's).
func SameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && strings.EqualFold(a.Hostname(), b.Hostname()) && defaultPort(a) == defaultPort(b)
}

func (ks *keySet) getJSON(ctx context.Context, target, accept string, auth bearer, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	if ks.mayAuthenticate(req.URL) {
		if auth.err != nil {
			return auth.err
		}
		if auth.token != "" {
			req.Header.Set("Authorization", "Bearer "+auth.token)
		}
	}
	resp, err := ks.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", target, resp.StatusCode)
	}
	return readJSON(resp.Body, target, v)
}

// readJSON decodes at most maxDocBytes of body into v.
func readJSON(body io.Reader, target string, v any) error {
	b, err := io.ReadAll(io.LimitReader(body, maxDocBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if len(b) > maxDocBytes {
		return fmt.Errorf("%s: the answer is larger than %d bytes", target, maxDocBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON expected", target)
	}
	return nil
}

// mayAuthenticate reports whether this server's own token may go to target: only with a
// CA file (so TLS trusts the cluster's CA alone), over https, to the issuer's own origin.
func (ks *keySet) mayAuthenticate(target *url.URL) bool {
	if ks.cfg.AuthTokenFile == "" || ks.cfg.CAFile == "" || target.Scheme != "https" {
		return false
	}
	issuer, err := url.Parse(ks.cfg.Issuer)
	return err == nil && issuer.Scheme == "https" && SameOrigin(issuer, target)
}

// defaultPort is u's port, or its scheme's when it names none.
func defaultPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// maxTokenFileBytes bounds AuthTokenFile; a projected token is about 1 KiB.
const maxTokenFileBytes = 64 << 10

// bearer is this server's own token for the issuer ("" for none), or why it cannot be read.
type bearer struct {
	token string
	err   error
}

// authToken reads AuthTokenFile afresh (a projected token rotates on disk) when it may be
// sent at all; a file that does not exist means no token. It never blocks on the file.
func (ks *keySet) authToken() bearer {
	if ks.cfg.AuthTokenFile == "" || ks.cfg.CAFile == "" {
		return bearer{}
	}
	return readBearer(ks.cfg.AuthTokenFile)
}

// readBearer reads a token file afresh; a file that does not exist means no token.
func readBearer(file string) bearer {
	b, err := secretfile.Read(file, maxTokenFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return bearer{}
	}
	if err != nil {
		return bearer{err: fmt.Errorf("read the token file: %w", err)}
	}
	token := strings.TrimSpace(string(b))
	if strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return bearer{err: fmt.Errorf("the token file %s holds spaces, control or non-ASCII characters", file)}
	}
	return bearer{token: token}
}
