package client_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/certtest"
)

// splitTLSServer serves a real server's two handlers (NewSplitServer) over https with a
// certificate of ca, and returns the people's and the operator's URLs.
func splitTLSServer(t *testing.T, ca *certtest.CA) (people, operator string) {
	t.Helper()
	srv := newServer(t, nil) // for its store and options
	leaf := ca.MustLeaf(t)
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	peopleH, operatorH := api.NewSplitServer(srv.Store, srv.Options)
	var urls []string
	for _, h := range []http.Handler{peopleH, operatorH} {
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.StartTLS()
		t.Cleanup(s.Close)
		urls = append(urls, s.URL)
	}
	return urls[0], urls[1]
}

// TestWithCAFile: a client that trusts the test's CA reconciles a server whose two ports
// serve https with a certificate of that CA, the claim on the operator's port and the key
// check on people's; without the CA, or with another, it reaches neither.
func TestWithCAFile(t *testing.T) {
	t.Parallel()
	ca := certtest.MustCA(t, "terdut-server test CA")
	people, operator := splitTLSServer(t, ca)
	caFile := ca.MustWriteCA(t, t.TempDir())

	t.Run("OK", func(t *testing.T) {
		c := mustClient(t, people, client.WithOperatorURL(operator), client.WithCAFile(caFile),
			client.WithOperatorToken(apitest.OperatorToken))
		res, err := c.Reconcile(t.Context(), "")
		if err != nil || res.Action != client.ActionClaimed {
			t.Fatalf("first reconcile: got %v, %v, want claimed", res.Action, err)
		}
		res, err = c.Reconcile(t.Context(), res.APIKey.Key)
		if err != nil || res.Action != client.ActionNone {
			t.Errorf("second reconcile, with the key: got %v, %v, want none", res.Action, err)
		}
		if got := c.String(); !strings.Contains(got, people) || !strings.Contains(got, "operator: "+operator) {
			t.Errorf("String: got %q, want both URLs", got)
		}
	})
	t.Run("WithHTTPClient", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{}}
		c := mustClient(t, people, client.WithOperatorURL(operator), client.WithHTTPClient(hc), client.WithCAFile(caFile))
		if _, err := c.Status(t.Context()); err != nil {
			t.Errorf("status: got %v, want nil", err)
		}
		if tc := hc.Transport.(*http.Transport).TLSClientConfig; tc != nil && tc.RootCAs != nil {
			t.Error("WithCAFile changed the caller's transport's CAs")
		}
	})
	t.Run("ErrUnknownAuthority", func(t *testing.T) {
		other := certtest.MustCA(t, "another CA").MustWriteCA(t, t.TempDir())
		for name, c := range map[string]*client.Client{
			"no CA":      mustClient(t, people, client.WithOperatorURL(operator)),
			"another CA": mustClient(t, people, client.WithOperatorURL(operator), client.WithCAFile(other)),
		} {
			_, err := c.Status(t.Context())
			if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("status with %s: got %v, want ErrUnavailable about the certificate", name, err)
			}
		}
	})
	t.Run("ErrCAFile", func(t *testing.T) {
		notPEM := filepath.Join(t.TempDir(), "ca.crt")
		if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			opts []client.Option
			want string
		}{
			{"Missing", []client.Option{client.WithCAFile(filepath.Join(t.TempDir(), "none.crt"))}, "no such file"},
			{"NotPEM", []client.Option{client.WithCAFile(notPEM)}, "holds no PEM certificate"},
			{"Transport", []client.Option{client.WithHTTPClient(&http.Client{Transport: roundTripperFunc(nil)}), client.WithCAFile(caFile)}, "*http.Transport"},
			{"OperatorURL", []client.Option{client.WithOperatorURL("terdut:8081")}, "operator URL must be an absolute"},
		} {
			if _, err := client.New(people, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
			}
		}
	})
}

// roundTripperFunc is a RoundTripper that is not an *http.Transport.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
