package api_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// rawOperatorCall sends a POST as a browser or a hostile page could: any Host, headers and body.
func rawOperatorCall(t *testing.T, srv *apitest.Server, path, host string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBootstrap_BrowserRequests: no web page can make a visitor's browser claim or reset the
// install. The claim and the reset take only a JSON body (or none) and refuse browsers'
// cross-site requests, whatever is configured; with no operator authentication the open
// claim is taken only at the public URL's host or a loopback address (not through a name of
// an attacker's that resolves to the server).
func TestBootstrap_BrowserRequests(t *testing.T) {
	public, _ := url.Parse("https://terdut.example.com")
	open := func(t *testing.T) *apitest.Server {
		return apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens, o.PublicURL = nil, public })
	}
	bearer := http.Header{"Authorization": {"Bearer " + apitest.OperatorToken}}
	text := http.Header{"Content-Type": {"text/plain"}}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	crossSite := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}
	merge := func(hs ...http.Header) http.Header {
		out := http.Header{}
		for _, h := range hs {
			for k, v := range h {
				out[k] = v
			}
		}
		return out
	}
	refused := []struct {
		name       string
		withToken  bool
		path, host string
		header     http.Header
		body       string
		status     int
		code       string
	}{
		{"OpenClaimTextPlain", false, "/api/bootstrap", "", text, `{}`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"OpenClaimForm", false, "/api/bootstrap", "", form, `a=b`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"OpenClaimBodyWithoutType", false, "/api/bootstrap", "", nil, `{}`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"OpenClaimCrossSite", false, "/api/bootstrap", "", crossSite, "", http.StatusForbidden, "cross_origin"},
		{"OpenClaimCrossSiteTextPlain", false, "/api/bootstrap", "", merge(crossSite, text), `x`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"OpenClaimForeignHost", false, "/api/bootstrap", "rebind.evil.example", nil, "", http.StatusForbidden, "host_not_allowed"},
		{"OpenClaimLookalikeHost", false, "/api/bootstrap", "terdut.example.com.evil.example", nil, "", http.StatusForbidden, "host_not_allowed"},
		{"TokenClaimTextPlain", true, "/api/bootstrap", "", merge(bearer, text), `{}`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"TokenClaimCrossSite", true, "/api/bootstrap", "", merge(bearer, crossSite), "", http.StatusForbidden, "cross_origin"},
		{"TokenResetTextPlain", true, "/api/bootstrap/reset", "", merge(bearer, text), `{}`, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"TokenResetCrossSite", true, "/api/bootstrap/reset", "", merge(bearer, crossSite), "", http.StatusForbidden, "cross_origin"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			srv := open(t)
			if tt.withToken {
				srv = newServer(t)
			}
			if strings.HasSuffix(tt.path, "/reset") {
				srv.MustClaim(t)
			}
			before := mustStatus(t, srv)
			status, body := rawOperatorCall(t, srv, tt.path, tt.host, tt.header, tt.body)
			if status != tt.status || !strings.Contains(body, `"code":"`+tt.code+`"`) {
				t.Fatalf("got %d %s, want %d %s", status, body, tt.status, tt.code)
			}
			if after := mustStatus(t, srv); after != before {
				t.Fatalf("claim state: got %+v, want %+v (unchanged)", after, before)
			}
		})
	}

	accepted := []struct {
		name   string
		host   string
		header http.Header
		body   string
	}{
		{"PublicHost", "terdut.example.com", nil, ""},
		{"PublicHostOtherCaseAndPort", "Terdut.Example.COM:443", nil, ""},
		{"Localhost", "localhost:8080", nil, ""},
		{"IPv6Loopback", "[::1]:8080", nil, ""},
		{"JSONBody", "", http.Header{"Content-Type": {"application/json; charset=utf-8"}}, `{}`},
		{"SameOriginBrowser", "terdut.example.com", http.Header{"Sec-Fetch-Site": {"same-origin"}}, ""},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			srv := open(t)
			if status, body := rawOperatorCall(t, srv, "/api/bootstrap", tt.host, tt.header, tt.body); status != http.StatusCreated {
				t.Fatalf("got %d %s, want 201", status, body)
			}
		})
	}
	t.Run("TokenAnyHost", func(t *testing.T) {
		// With the operator token, the Host does not matter: in a cluster the operator calls
		// the Service's name.
		srv := newServer(t)
		if status, body := rawOperatorCall(t, srv, "/api/bootstrap", "terdut.terdut.svc:8080", bearer, ""); status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", status, body)
		}
	})
}
