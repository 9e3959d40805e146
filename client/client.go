// Package client is the Go client of terdut-server's bootstrap API, written for the
// maintainers of terdut-operator.
//
// The operator owns an install: it generates the operator token, mounts it into the server's
// pod (--operator-token-file) and gives the same token to this client with
// [WithOperatorToken]; or, with no shared secret at all, it gives this client the path of
// its projected service-account token with [WithOperatorTokenFile], which is re-read on
// every request (the server then runs with --operator-oidc-issuer). It then calls
// [Client.Reconcile] on every reconcile of a TerdutServer, with the API key it holds in its
// Secret (or "" when it holds none). Reconcile is the whole
// recommended bootstrap step: it claims a fresh install, leaves a healthy one alone, and
// recovers a lost claim by resetting and claiming it again, which touches no person's data.
//
//	c, err := client.New("http://terdut.ns.svc:8080", client.WithOperatorToken(token))
//	...
//	res, err := c.Reconcile(ctx, heldKey)
//	switch {
//	case err != nil:
//		// see the errors of Reconcile: requeue, or set a condition
//	case res.Action != client.ActionNone:
//		// store res.APIKey.Key in the Secret, now: it is shown once
//	}
//
// A server that serves the operator's endpoints on a port of their own (--operator-listen)
// is reached at two URLs: the operator's port for the claim and the reset, and people's port
// (or the public URL, where a NetworkPolicy admits only the ingress to it) for the key check;
// with --tls-cert-file, over https with the CA of its certificate:
//
//	c, err := client.New("https://terdut.example.com",
//		client.WithOperatorURL("https://terdut-server.terdut.svc:8081"),
//		client.WithCAFile("/etc/terdut-server-ca/ca.crt"), client.WithOperatorTokenFile(path))
//
// The lower-level calls ([Client.Status], [Client.Claim], [Client.Reset], [Client.Whoami],
// [Client.CheckKey]) are there for tools and tests; an operator needs only Reconcile.
//
// Errors: every answer the server gives with an unexpected status is an [*Error], which
// carries the status, the server's stable code, its message and Retry-After. Match the
// documented ones with errors.Is and the sentinels ([ErrAlreadyClaimed], [ErrUnauthorized],
// [ErrOperatorTokenNotConfigured], [ErrRateLimited], [ErrBootstrapPending], [ErrUnavailable]).
// No error, and no value's String, ever holds the operator token or an API key.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultTimeout bounds each HTTP call unless [WithTimeout] says otherwise.
const DefaultTimeout = 10 * time.Second

// maxBodyBytes bounds how much of a response the client reads.
const maxBodyBytes = 1 << 20

// Client calls one terdut-server. It is safe for concurrent use. It is cheap to make, so
// when the operator token is rotated, make a new one with the new token.
type Client struct {
	base      *url.URL
	operator  *url.URL // of the claim, its status and the reset: base unless WithOperatorURL
	opRaw     string
	caFile    string
	http      *http.Client
	timeout   time.Duration
	token     string
	tokenFile string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (for its transport, TLS
// settings or proxy). The client never follows redirects, whatever hc's CheckRedirect says,
// so the operator token and API keys go only to the base URL; hc itself is not modified.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			copied := *hc
			c.http = &copied
		}
	}
}

// WithTimeout bounds each HTTP call (default [DefaultTimeout]); a call that takes longer
// fails with an error matching [ErrUnavailable] and context.DeadlineExceeded. Zero or less
// means no bound of the client's own: only the context passed to each call. Reconcile makes
// several calls, each bounded separately; bound the whole with the context.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithOperatorToken sets the operator token that [Client.Claim], [Client.Reset] and
// [Client.Reconcile] send as a Bearer token: one of the tokens in the server's
// --operator-token-file. Without it, Claim works only on a server with no token configured
// and Reset never works. The client sends it nowhere but the base URL and never puts it in
// an error.
func WithOperatorToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithOperatorTokenFile makes [Client.Claim], [Client.Reset] and [Client.Reconcile] send, as
// the Bearer token, the content of the file at path (surrounding white space trimmed), read
// afresh on every request: a Kubernetes projected service-account token (audience
// terdut-server, for a server with --operator-oidc-issuer) that the kubelet rotates on disk,
// or an operator token kept in a mounted Secret. A file that cannot be read, or that holds
// no token or one that cannot be sent in a header, fails the request before anything is
// sent; the error names the file, never its content. Use it instead of [WithOperatorToken].
func WithOperatorTokenFile(path string) Option {
	return func(c *Client) { c.tokenFile = path }
}

// WithOperatorURL sends the operator's calls ([Client.Status], [Client.Claim],
// [Client.Reset]) to operatorURL, the server's --operator-listen port (such as
// "https://terdut-server.terdut.svc:8081"), instead of the base URL, which [Client.Whoami]
// and [Client.CheckKey] still call: a server with --operator-listen answers the operator's
// endpoints 404 on its people's port, and people's on the operator's. operatorURL follows the
// base URL's rules.
func WithOperatorURL(operatorURL string) Option {
	return func(c *Client) { c.opRaw = operatorURL }
}

// WithCAFile makes the client trust, besides the system's CAs, the certificates of the PEM
// bundle at path on https: the CA of the server's --tls-cert-file (such as the ca.crt of a
// cert-manager Secret), while a public URL behind an ingress keeps its public certificate.
// New reads it once: when the CA is rotated, make a new
// client. With [WithHTTPClient], that client's Transport must be nil or an *http.Transport,
// which is copied, not modified.
func WithCAFile(path string) Option {
	return func(c *Client) { c.caFile = path }
}

// New returns a client of the terdut-server at baseURL, an absolute http:// or https:// URL
// such as "http://terdut.monitoring.svc:8080" (a path prefix is kept: "https://host/terdut").
// It fails when baseURL (or the operator URL) is not such a URL, the CA file does not hold a
// PEM certificate, or the operator token cannot be sent in a header.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := parseBase("base URL", baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: u, operator: u, http: &http.Client{}, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.opRaw != "" {
		if c.operator, err = parseBase("operator URL", c.opRaw); err != nil {
			return nil, err
		}
	}
	if c.caFile != "" {
		if c.http.Transport, err = trusting(c.http.Transport, c.caFile); err != nil {
			return nil, err
		}
	}
	if c.token != "" && c.tokenFile != "" {
		return nil, errors.New("client: give the operator token or its file, not both")
	}
	if !headerSafe(c.token) {
		return nil, errors.New("client: the operator token holds spaces, control characters or non-ASCII characters; it cannot be one the server accepts")
	}
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c, nil
}

// parseBase checks an absolute http:// or https:// URL without a query or fragment, and
// drops a trailing slash of its path.
func parseBase(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: the %s must be an absolute http:// or https:// URL, such as http://terdut.monitoring.svc:8080", what)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: the %s may not have a query or a fragment", what)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// trusting returns a copy of rt (nil: http.DefaultTransport) that trusts the CAs of the PEM
// file at caFile besides the system's.
func trusting(rt http.RoundTripper, caFile string) (http.RoundTripper, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return nil, errors.New("client: WithCAFile needs the Transport of WithHTTPClient's client to be nil or an *http.Transport")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: the CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client: the CA file %s holds no PEM certificate", caFile)
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.RootCAs = pool
	return t, nil
}

// String names the server the client calls; it never shows the operator token.
func (c *Client) String() string {
	if c.operator != c.base {
		return "terdut-server client of " + c.base.Redacted() + " (operator: " + c.operator.Redacted() + ")"
	}
	return "terdut-server client of " + c.base.Redacted()
}

// GoString is String, so that %#v does not show the operator token either.
func (c *Client) GoString() string { return c.String() }

// headerSafe reports whether s can be sent as a Bearer token: printable ASCII, no spaces.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// call sends one request to base and decodes a response of status want into out (when not nil).
// Any other status becomes an *Error; a failure to reach the server wraps ErrUnavailable,
// unless it is ctx that ended, in which case it wraps only ctx's error.
func (c *Client) call(ctx context.Context, base *url.URL, method, path, bearer string, want int, out any) error {
	op := method + " " + path
	callCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, method, base.String()+path, nil)
	if err != nil {
		return fmt.Errorf("terdut-server %s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "terdut-server-client")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("terdut-server %s: %w", op, err)
		}
		return fmt.Errorf("terdut-server %s: %w: %w", op, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("terdut-server %s: read the response: %w", op, err)
		}
		return fmt.Errorf("terdut-server %s: read the response: %w: %w", op, ErrUnavailable, err)
	}
	if resp.StatusCode != want {
		return newError(op, resp, body)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("terdut-server %s: the %d response is not the JSON expected: %w", op, resp.StatusCode, err)
	}
	return nil
}
