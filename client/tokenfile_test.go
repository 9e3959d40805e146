package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// writeTokenFile replaces the file at path as the kubelet does: a new file renamed over it.
func writeTokenFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestClient_OperatorTokenFile: with WithOperatorTokenFile, Reconcile sends what the file
// holds at each request, so a projected service-account token that rotates on disk keeps
// working, and a token gone bad in the file is refused.
func TestClient_OperatorTokenFile(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v, err := opjwt.New(opjwt.Config{Issuer: is.URL(), Audience: "terdut-server",
		Subjects: []string{satest.SubjectOf("ops", "terdut-operator")}})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, func(o *api.Options) { o.OperatorTokens, o.OperatorIdentity = nil, v })
	path := filepath.Join(t.TempDir(), "token")
	token := func(pod string) string {
		return is.Sign(t, satest.ServiceAccount("ops", "terdut-operator", pod, "terdut-server"))
	}
	lastPod := func() string {
		entries, err := srv.Store.BootstrapAudit(t.Context())
		if err != nil || len(entries) == 0 {
			t.Fatalf("audit: %d rows, %v", len(entries), err)
		}
		e := entries[len(entries)-1]
		if e.Method != store.AuthServiceAccount {
			t.Fatalf("audit: got %+v, want a service_account row", e)
		}
		return e.Pod
	}
	writeTokenFile(t, path, token("operator-a")+"\n")
	c := mustClient(t, srv.URL, client.WithOperatorTokenFile(path))

	res := mustReconcile(t, c, "", client.ActionClaimed, 1)
	if pod := lastPod(); pod != "operator-a" {
		t.Fatalf("claim's pod: got %q, want operator-a", pod)
	}
	writeTokenFile(t, path, token("operator-b"))
	mustReconcile(t, c, res.APIKey.Key, client.ActionNone, 1)
	res = mustReconcile(t, c, "", client.ActionResetAndClaimed, 2)
	if pod := lastPod(); pod != "operator-b" {
		t.Fatalf("after the file was rewritten: got pod %q, want operator-b", pod)
	}

	expired := satest.ServiceAccount("ops", "terdut-operator", "operator-c", "terdut-server")
	expired.IssuedAt, expired.NotBefore, expired.Expiry = time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	writeTokenFile(t, path, is.Sign(t, expired))
	if _, err := c.Reconcile(t.Context(), ""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("with an expired token in the file: got %v, want ErrUnauthorized", err)
	}

	for name, content := range map[string]string{"Empty": " \n", "Space": "abc def", "NonASCII": "abc\u00a0def"} {
		t.Run(name, func(t *testing.T) {
			writeTokenFile(t, path, content)
			_, err := c.Reconcile(t.Context(), "")
			if err == nil || !strings.Contains(err.Error(), path) || (strings.TrimSpace(content) != "" && strings.Contains(err.Error(), strings.TrimSpace(content))) {
				t.Fatalf("got %v, want an error naming the file but not its content", err)
			}
		})
	}
	t.Run("Missing", func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Reset(t.Context()); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want an error wrapping os.ErrNotExist", err)
		}
	})
	if got, err := c.Status(t.Context()); err != nil || got.Generation != 2 || got.State != client.StateComplete {
		t.Fatalf("after the refused calls: got %+v, %v, want complete at generation 2", got, err)
	}
}

// TestClient_OperatorTokenFile_OperatorToken: the file may hold an operator token too.
func TestClient_OperatorTokenFile_OperatorToken(t *testing.T) {
	srv := newServer(t, nil)
	path := filepath.Join(t.TempDir(), "token")
	writeTokenFile(t, path, apitest.OperatorToken+"\n")
	mustReconcile(t, mustClient(t, srv.URL, client.WithOperatorTokenFile(path)), "", client.ActionClaimed, 1)
	if _, err := client.New(srv.URL, client.WithOperatorTokenFile(path), client.WithOperatorToken(apitest.OperatorToken)); err == nil {
		t.Fatal("New with a token and a token file: got nil error, want one")
	}
}
