// Package opjwt verifies the operator's workload identity: a JWT such as a Kubernetes
// projected service-account token, signed by an issuer whose OpenID discovery document and
// JWKS say which keys it signs with. A token proves the operator only when its signature
// (RS256 or ES256) verifies with a key of the issuer's JWKS, its iss is the issuer exactly
// (or one of the other issuers accepted during a move), its aud holds the audience, it is
// inside exp and nbf (with at most Leeway of clock skew), it lives at most MaxLifetime
// (exp - iat), its sub is one of the allowed subjects and, when a review is configured, the
// API server still accepts it (TokenReview: its pod and service account still exist).
package opjwt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// Leeway is the clock skew allowed on exp, nbf and iat.
const Leeway = 60 * time.Second

// MaxLifetime bounds exp - iat: a token minted to live longer is refused.
const MaxLifetime = 24 * time.Hour

// maxTokenBytes bounds the tokens parsed; a Kubernetes token is about 1 KiB.
const maxTokenBytes = 16 << 10

// algorithms are the only signature algorithms accepted: "none" and the HMAC family never are.
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// Config says which issuer to trust and which of its tokens prove the operator.
type Config struct {
	Issuer string // the issuer URL, compared with iss exactly; its discovery document is read
	// OtherIssuers are further iss values accepted, also as the issuer discovery names: a
	// cluster moving from one issuer to another accepts both (the API server's repeated
	// --service-account-issuer), and once it signs with the new one, discovery names it.
	OtherIssuers []string
	Audience     string   // aud must contain it
	Subjects     []string // sub must be one of them
	// JWKSURL, when set, is where the keys are read, whatever discovery names. Without it the
	// keys are read at the jwks_uri of discovery when that is on the issuer's own origin, and
	// otherwise at the same path on the issuer's origin: the API server of a cluster names
	// its advertise address there, another origin, while it serves the same keys at every
	// address it answers; and a discovery document cannot move the key source elsewhere.
	JWKSURL string
	// Review, when set, asks the API server about every token that passes the offline checks.
	Review *ReviewConfig
	// CAFile, when set, is the only CA bundle the issuer's TLS certificate may chain to:
	// New builds HTTPClient from it (see NewHTTPClient), and only then is AuthTokenFile used.
	CAFile string
	// HTTPClient fetches the discovery document and the JWKS when CAFile is empty; nil: a
	// client with a 10 s timeout and the system's roots. Give CAFile or HTTPClient, not both.
	HTTPClient *http.Client
	// AuthTokenFile, when the file exists and CAFile is set, holds a Bearer token sent to the
	// discovery and JWKS endpoints on the issuer's own https origin (scheme, host and port),
	// re-read on every fetch: this server's own service-account token, for API servers that do
	// not serve them anonymously. It is a credential of the cluster's API, so it never goes
	// to another host (such as a jwks_uri elsewhere), over http, or to a server trusted
	// through the system's roots.
	AuthTokenFile string
	// MinRefresh is the least time between two fetches of the JWKS caused by a token whose
	// key is unknown; zero: 10 s.
	MinRefresh time.Duration
	Logger     *slog.Logger
}

// Identity is who a verified token says the caller is.
type Identity struct {
	Subject        string
	Namespace      string // kubernetes.io.namespace, when present
	ServiceAccount string // kubernetes.io.serviceaccount.name, when present
	Pod            string // kubernetes.io.pod.name, when the token is bound to a pod
}

// Refusal reasons, a fixed set fit for metric labels.
const (
	ReasonMalformed   = "malformed"
	ReasonAlgorithm   = "algorithm"
	ReasonUnknownKey  = "unknown_key"
	ReasonSignature   = "signature"
	ReasonIssuer      = "issuer"
	ReasonAudience    = "audience"
	ReasonExpired     = "expired"
	ReasonNotYetValid = "not_yet_valid"
	ReasonLifetime    = "lifetime"
	ReasonSubject     = "subject"
	ReasonRevoked     = "revoked" // the API server no longer accepts the token (Review)
)

// RefusedError says why a token does not prove the operator. Its message never holds the
// token, and quotes at most logcap.MaxBytes of each value the token names (a kid, a subject),
// so that it can go into a log line whoever sent it.
type RefusedError struct {
	Reason string // one of the Reason* constants
	Detail string
}

func (e *RefusedError) Error() string { return "operator identity refused: " + e.Detail }

// ErrUnavailable means the issuer's keys could not be read, so the token could be neither
// verified nor refused.
var ErrUnavailable = errors.New("the operator identity issuer's keys cannot be read")

// ErrKeyNotYetRead, always with ErrUnavailable, means the token names a key that the keys
// read last, less than MinRefresh ago, did not hold: the issuer may have added it since (a
// rotation), and the keys are not read again before MinRefresh has passed, so the token can
// be neither verified nor refused yet. Try again shortly.
var ErrKeyNotYetRead = errors.New("a key the keys read last did not hold")

func refuse(reason, format string, args ...any) error {
	return &RefusedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// CheckIssuer says what is wrong with an issuer URL, or nil; the caller names the URL. It
// must be absolute, without credentials, query or fragment, and https unless its host is a
// loopback address: whoever can answer the discovery and JWKS requests chooses the keys that
// decide who owns the install, so they may not travel in clear over a network.
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("give the absolute URL that the tokens name in iss (such as https://kubernetes.default.svc.cluster.local), without credentials, query or fragment")
	}
	if !SecureOrLoopback(u) {
		return errors.New("use https; plain http is accepted only on a loopback address (such as 127.0.0.1), since the issuer's keys decide who owns the install")
	}
	return nil
}

// SecureOrLoopback reports whether what is read from or sent to u cannot be read or changed on
// the way: https, or http to a literal loopback address (a name such as localhost is resolved,
// possibly by DNS).
func SecureOrLoopback(u *url.URL) bool {
	if u.Scheme == "https" {
		return true
	}
	ip, err := netip.ParseAddr(u.Hostname())
	return u.Scheme == "http" && err == nil && ip.IsLoopback()
}

// Verifier checks operator tokens against one issuer. It is safe for concurrent use.
type Verifier struct {
	cfg    Config
	keys   *keySet
	review *reviewer // nil: the offline checks alone
}

// New returns a Verifier for cfg. It checks the configuration but does not contact the
// issuer: the keys are fetched on the first token.
func New(cfg Config) (*Verifier, error) {
	for _, iss := range append([]string{cfg.Issuer}, cfg.OtherIssuers...) {
		if err := CheckIssuer(iss); err != nil {
			return nil, fmt.Errorf("issuer %q: %w", iss, err)
		}
	}
	if cfg.JWKSURL != "" {
		if u, err := url.Parse(cfg.JWKSURL); err != nil || u.Host == "" || !SecureOrLoopback(u) {
			return nil, fmt.Errorf("JWKS URL %q: give an absolute https URL (plain http only on a loopback address)", cfg.JWKSURL)
		}
	}
	if cfg.Audience == "" {
		return nil, errors.New("no audience")
	}
	if len(cfg.Subjects) == 0 {
		return nil, errors.New("no allowed subject")
	}
	switch {
	case cfg.CAFile != "" && cfg.HTTPClient != nil:
		return nil, errors.New("give the CA file or the HTTP client, not both")
	case cfg.CAFile != "":
		hc, err := NewHTTPClient(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: %w", cfg.CAFile, err)
		}
		cfg.HTTPClient = hc
	case cfg.HTTPClient == nil:
		cfg.HTTPClient, _ = NewHTTPClient("") // no CA file: it cannot fail
	}
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := &Verifier{cfg: cfg, keys: newKeySet(cfg)}
	if cfg.Review != nil {
		r, err := newReviewer(*cfg.Review, cfg.Audience)
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err)
		}
		v.review = r
	}
	return v, nil
}

// Issuer returns the issuer the Verifier trusts.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// issuers are the iss values accepted.
func (v *Verifier) issuers() []string { return append([]string{v.cfg.Issuer}, v.cfg.OtherIssuers...) }

// Warm reads the issuer's keys now, and says why it cannot. Tokens do not need it: they fetch
// the keys when none is held.
func (v *Verifier) Warm(ctx context.Context) error { return v.keys.warm(ctx) }

// LooksLikeJWT reports whether token has the shape of a signed JWT (three parts separated
// by dots), so that a caller can tell it from an opaque operator token without parsing it.
func LooksLikeJWT(token string) bool { return strings.Count(token, ".") == 2 }

type claims struct {
	jwt.Claims
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
		Pod *struct {
			Name string `json:"name"`
		} `json:"pod"`
	} `json:"kubernetes.io"`
}

// Verify checks token and returns the identity it proves. It returns a *RefusedError for a
// token that does not prove the operator, and an error wrapping ErrUnavailable when the
// issuer's keys cannot be read.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if len(token) > maxTokenBytes {
		return Identity{}, refuse(ReasonMalformed, "the token is longer than %d bytes", maxTokenBytes)
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		if strings.Contains(err.Error(), "unexpected signature algorithm") {
			return Identity{}, refuse(ReasonAlgorithm, "the token is not signed with RS256 or ES256")
		}
		return Identity{}, refuse(ReasonMalformed, "the token is not a signed JWT")
	}
	if len(tok.Headers) != 1 {
		return Identity{}, refuse(ReasonMalformed, "the token has %d signatures, want 1", len(tok.Headers))
	}
	h := tok.Headers[0]
	keys, err := v.keys.lookup(ctx, h.KeyID, jose.SignatureAlgorithm(h.Algorithm))
	if err != nil {
		return Identity{}, err
	}
	var c claims
	verified := false
	for _, k := range keys {
		if err := tok.Claims(k.Key, &c); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, refuse(ReasonSignature, "the signature does not verify with the issuer's key %q", logcap.String(h.KeyID))
	}
	if err := v.checkClaims(c, time.Now()); err != nil {
		return Identity{}, err
	}
	if v.review != nil {
		if err := v.review.check(ctx, token, c.Subject); err != nil {
			return Identity{}, err
		}
	}
	id := Identity{Subject: c.Subject}
	if k := c.Kubernetes; k != nil {
		id.Namespace = k.Namespace
		if k.ServiceAccount != nil {
			id.ServiceAccount = k.ServiceAccount.Name
		}
		if k.Pod != nil {
			id.Pod = k.Pod.Name
		}
	}
	return id, nil
}

// checkClaims checks the verified claims against the issuer, audience, time, lifetime and
// allowed subjects.
func (v *Verifier) checkClaims(c claims, now time.Time) error {
	if c.Expiry == nil || c.IssuedAt == nil {
		return refuse(ReasonLifetime, "the token has no exp or no iat, so its lifetime is unknown")
	}
	if !slices.Contains(v.issuers(), c.Issuer) {
		return refuse(ReasonIssuer, "iss is not %s", strings.Join(v.issuers(), " or "))
	}
	err := c.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience{v.cfg.Audience}, Time: now}, Leeway)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return refuse(ReasonAudience, "aud does not hold %s", v.cfg.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return refuse(ReasonExpired, "the token expired at %s", c.Expiry.Time().UTC().Format(time.RFC3339))
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return refuse(ReasonNotYetValid, "the token is not valid before %s", notBefore(c).UTC().Format(time.RFC3339))
	case err != nil:
		return refuse(ReasonMalformed, "the token's claims are invalid")
	}
	if life := c.Expiry.Time().Sub(c.IssuedAt.Time()); life > MaxLifetime {
		return refuse(ReasonLifetime, "the token lives %s (exp - iat), more than %s", life, MaxLifetime)
	}
	if !slices.Contains(v.cfg.Subjects, c.Subject) {
		return refuse(ReasonSubject, "the subject %q is not allowed", logcap.String(c.Subject))
	}
	return nil
}

func notBefore(c claims) time.Time {
	if c.NotBefore != nil && c.NotBefore.Time().After(c.IssuedAt.Time()) {
		return c.NotBefore.Time()
	}
	return c.IssuedAt.Time()
}
