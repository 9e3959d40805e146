package hydra

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/interop/suite"
)

// Provider is a running Hydra. Its public endpoints are reached through a proxy of the test's
// (Hydra's issuer), which counts UserInfo requests and reads the ID tokens' key IDs.
type Provider struct {
	// URL is the issuer: the proxy in front of Hydra's public port.
	URL string
	// PublicURL is Hydra's urls.self.public: URL, unless StartPublicElsewhere made it Hydra's
	// own public port, another origin.
	PublicURL    string
	AdminURL     string
	ClientID     string
	ClientSecret string

	watch suite.Watch
	http  *http.Client

	mu              sync.Mutex
	people          map[string]Claims         // by subject
	browsers        map[string]http.CookieJar // by subject, of those Remember keeps signed in
	authentications map[string]int            // by subject: see Authentications
}

// Claims is what the login and consent app grants a subject: the claims it puts in the ID
// token (session.id_token, which Hydra's UserInfo answers with too) and in the access token
// (session.access_token, which neither the ID token nor UserInfo carry).
type Claims struct {
	IDToken     map[string]any
	AccessToken map[string]any
}

// freePort returns a loopback port nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs `hydra serve all --dev --sqa-opt-out` (bin, from Build) with an in-memory
// database on 127.0.0.1 until tb's test ends, and creates an OAuth2 client through its admin
// API whose only redirect URI is redirectURL. The process is killed and waited for at the end.
func Start(tb testing.TB, bin, redirectURL string) *Provider {
	tb.Helper()
	return start(tb, bin, redirectURL, false)
}

// StartPublicElsewhere is Start with urls.self.public not the issuer but Hydra's own public
// port (http://127.0.0.1:<port>, PublicURL), as a Hydra whose public URL was set apart from
// its issuer: its discovery names the token endpoint, JWKS and UserInfo on that origin.
func StartPublicElsewhere(tb testing.TB, bin, redirectURL string) *Provider {
	tb.Helper()
	return start(tb, bin, redirectURL, true)
}

func start(tb testing.TB, bin, redirectURL string, publicElsewhere bool) *Provider {
	tb.Helper()
	proxyLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	publicPort, adminPort := freePort(tb), freePort(tb)
	p := &Provider{URL: "http://" + proxyLn.Addr().String(), AdminURL: fmt.Sprintf("http://127.0.0.1:%d", adminPort),
		http: &http.Client{Timeout: 30 * time.Second}, people: map[string]Claims{},
		browsers: map[string]http.CookieJar{}, authentications: map[string]int{}}
	p.PublicURL = p.URL
	if publicElsewhere {
		p.PublicURL = fmt.Sprintf("http://127.0.0.1:%d", publicPort)
	}
	dir := tb.TempDir()
	config := fmt.Sprintf(`dsn: memory
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
urls:
  self: {issuer: %q, public: %q}
  login: http://login-app.test/login
  consent: http://login-app.test/consent
secrets:
  system: [%q]
oidc:
  subject_identifiers: {supported_types: [public]}
log: {level: info, format: json, leak_sensitive_values: false}
`, publicPort, adminPort, p.URL, p.PublicURL, rand.Text())
	configPath := filepath.Join(dir, "hydra.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	logPath := filepath.Join(dir, "hydra.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out", "-c", configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("hydra: start: %v", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if tb.Failed() {
			out, _ := os.ReadFile(logPath)
			tb.Logf("hydra's log:\n%s", tail(out, 8<<10))
		}
	})

	public, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", publicPort))
	proxy := httputil.NewSingleHostReverseProxy(public)
	hs := &http.Server{Handler: p.watch.Wrap(proxy, "/oauth2/token", "/userinfo"), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(proxyLn) }()
	tb.Cleanup(func() { _ = hs.Close() })

	p.waitReady(tb, public.String())
	p.waitKeys(tb)
	var client struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	p.admin(tb, http.MethodPost, "/admin/clients", map[string]any{
		"client_name":                "terdut-server",
		"redirect_uris":              []string{redirectURL},
		"grant_types":                []string{"authorization_code"},
		"response_types":             []string{"code"},
		"scope":                      "openid profile email",
		"token_endpoint_auth_method": "client_secret_basic",
	}, &client)
	p.ClientID, p.ClientSecret = client.ID, client.Secret
	return p
}

// waitReady waits until both of Hydra's ports answer /health/ready.
func (p *Provider) waitReady(tb testing.TB, public string) {
	tb.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for _, base := range []string{p.AdminURL, public} {
		for {
			resp, err := p.http.Get(base + "/health/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				tb.Fatalf("hydra: %s not ready after 90s: %v", base, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitKeys waits until Hydra publishes its ID token signing key. Hydra makes the key on first
// use, which can take longer than its public port waits to write an answer (the first request
// then fails): made now, it does not make terdut-server's first discovery fail.
func (p *Provider) waitKeys(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := p.http.Get(p.URL + "/.well-known/jwks.json")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("hydra: no JWKS after 2 minutes: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// admin calls Hydra's admin API and decodes its JSON answer into out, failing tb unless it
// is a 2xx.
func (p *Provider) admin(tb testing.TB, method, path string, body, out any) {
	tb.Helper()
	if err := p.tryAdmin(tb.Context(), method, path, body, out); err != nil {
		tb.Fatal(err)
	}
}

func (p *Provider) tryAdmin(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.AdminURL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("hydra admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("hydra admin %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// SetClaims sets what the login and consent app grants subject from now on.
func (p *Provider) SetClaims(subject string, c Claims) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.people[subject] = c
}

// RotateKeys adds a new RS256 key to the key set Hydra signs ID tokens with
// (POST /admin/keys/hydra.openid.id-token); Hydra signs with the newest key of the set and
// keeps publishing the old one. The new key's creation time must be later than the old
// key's, to the second, for Hydra to take it as the newest.
func (p *Provider) RotateKeys(tb testing.TB) {
	tb.Helper()
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	p.admin(tb, http.MethodPost, "/admin/keys/hydra.openid.id-token", map[string]string{
		"alg": "RS256", "use": "sig", "kid": "rotated-" + rand.Text()[:8]}, nil)
}

// UserInfoRequests returns how many UserInfo requests Hydra received.
func (p *Provider) UserInfoRequests() int64 { return p.watch.UserInfoRequests() }

// LastKeyID returns the key ID of the last ID token Hydra issued.
func (p *Provider) LastKeyID() string { return p.watch.LastKeyID() }

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
