//go:build kube

package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// externalIssuer serves a cluster's discovery document and keys from another host, to anyone,
// as EKS, GKE and AKS publish theirs: a static https server on 127.0.0.2 with a CA of its own.
type externalIssuer struct {
	URL string
	CA  *kubetest.CA

	mu         sync.Mutex
	docs       map[string][]byte
	seen, auth atomic.Int64
}

func startExternalIssuer(t *testing.T, k *kubeCluster) *externalIssuer {
	t.Helper()
	ca, err := kubetest.NewCA(t.TempDir(), "public")
	if err != nil {
		t.Fatal(err)
	}
	_, _, pair, err := ca.Issue(t.TempDir(), "oidc", "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &externalIssuer{URL: "https://" + ln.Addr().String(), CA: ca, docs: map[string][]byte{}}
	srv := &http.Server{Handler: http.HandlerFunc(e.serve), TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// copyFrom publishes the API server's discovery document and keys, as a cluster's operator
// uploads them.
func (e *externalIssuer) copyFrom(t *testing.T, k *kubeCluster) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.docs["/.well-known/openid-configuration"] = k.Get("/.well-known/openid-configuration")
	e.docs["/openid/v1/jwks"] = k.Get("/openid/v1/jwks")
}

func (e *externalIssuer) serve(w http.ResponseWriter, r *http.Request) {
	e.seen.Add(1)
	if r.Header.Get("Authorization") != "" {
		e.auth.Add(1)
	}
	e.mu.Lock()
	doc, ok := e.docs[r.URL.Path]
	e.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}

func (e *externalIssuer) requests() int64   { return e.seen.Load() }
func (e *externalIssuer) authorized() int64 { return e.auth.Load() }
