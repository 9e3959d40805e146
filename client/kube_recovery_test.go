//go:build kube

package client_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestKube_Recovery is the incident's recovery, end to end on the real API server, with the
// kubeadm layout: terdut-operator, holding the claim's key in a Secret and proving itself
// with a projected token of its service account (rotated on disk midway), claims a fresh
// install, leaves it alone, recovers it after the documented wrong recovery (the
// TerdutServer, and so its Secret, deleted and recreated over the kept database) and after
// someone else's reset from the CLI, touching none of a person's data. Two replicas share
// the database: the operator claims on one and checks its key on the other.
func TestKube_Recovery(t *testing.T) {
	a := kubetest.Start(t, kubetest.Options{})
	a.CreateNamespace(kubeServerNS)
	a.CreateNamespace(kubeOperatorNS)
	example := filepath.Join("..", "deploy", "kubernetes", "service-account-identity")
	// terdut-server's account and its two permissions, as the chart renders them; the
	// operator's account is terdut-operator's own install's, never the chart's.
	a.MustApplyFiles(filepath.Join(example, "terdut-server.yaml"))
	a.CreateServiceAccount(kubeOperatorNS, kubeOperatorSA)
	a.CreatePod(kubeServerNS, "terdut-server-0", kubeServerSA)
	a.CreatePod(kubeOperatorNS, kubeOperatorPod, kubeOperatorSA)
	dir := t.TempDir()
	serverToken := filepath.Join(dir, "terdut-server-token")
	writeTokenFile(t, serverToken, a.Token(kubeServerNS, kubeServerSA, kubetest.TokenRequest{Pod: "terdut-server-0"}))

	db := pgtest.MustDatabase(t)
	identityLogs := &apitest.SyncBuffer{}
	replica := func() *apitest.Server {
		v, err := opjwt.New(opjwt.Config{Issuer: a.Issuer(), Audience: kubeAudience, Subjects: []string{kubeOperatorSubj},
			CAFile: a.CA.File, AuthTokenFile: serverToken, Logger: slog.New(slog.NewJSONHandler(identityLogs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return apitest.NewServer(t, db, func(o *api.Options) { o.OperatorIdentity, o.OperatorTokens = v, nil })
	}
	srvA, srvB := replica(), replica()

	operatorToken := filepath.Join(dir, "operator-token")
	mint := func() string {
		return a.Token(kubeOperatorNS, kubeOperatorSA, kubetest.TokenRequest{Audiences: []string{kubeAudience}, Seconds: 3600, Pod: kubeOperatorPod})
	}
	first := mint()
	writeTokenFile(t, operatorToken, first+"\n")
	sent := &bearerLog{next: http.DefaultTransport}
	op := &kubeOperator{api: a, sent: sent, client: mustClient(t, srvB.URL, client.WithOperatorURL(srvA.URL),
		client.WithOperatorTokenFile(operatorToken), client.WithHTTPClient(&http.Client{Transport: sent}))}
	whoami := func(srv *apitest.Server, key string) string {
		t.Helper()
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key})
		if resp.Status != http.StatusOK {
			return fmt.Sprint(resp.Status)
		}
		var me struct{ User struct{ Username string } }
		resp.JSON(t, &me)
		return "200 " + me.User.Username
	}
	principalOK := "200 " + store.PrincipalUsername
	keyWorksOnBoth := func(step, key string, want bool) {
		t.Helper()
		for name, srv := range map[string]*apitest.Server{"A": srvA, "B": srvB} {
			if got := whoami(srv, key); (got == principalOK) != want {
				t.Errorf("%s: GET /api/me on replica %s: got %s, want working %v", step, name, got, want)
			}
		}
	}

	// (1) A fresh install: no Secret yet; the operator claims it.
	if _, ok := a.Secret(kubeOperatorNS, kubeSecret); ok {
		t.Fatal("before the first reconcile: the Secret exists, want none")
	}
	key1 := op.reconcile(t, client.ActionClaimed, 1).APIKey.Key
	keyWorksOnBoth("claimed", key1, true)

	// (2) Nothing to do: nothing is sent with the operator's token, nothing changes.
	before, audited := sent.count(), len(mustAudit(t, srvA.Store))
	op.reconcile(t, client.ActionNone, 1)
	if sent.count() != before || len(mustAudit(t, srvA.Store)) != audited || op.heldKey(t) != key1 {
		t.Fatal("reconcile none: got operator requests, audit rows or a new key, want nothing changed")
	}

	// (3) A person signs in with a password and makes data of their own.
	alice := apitest.MustPerson(t, srvA.Store, "alice", store.RoleAdmin)
	session := srvB.MustLogin(t, "alice", alice.Password)
	laptop := mustCreated(t, srvA, apitest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/users/%d/api-keys", alice.User.ID),
		Cookie: session, Body: map[string]string{"name": "laptop", "current_password": alice.Password}})
	mustCreated(t, srvB, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: laptop,
		Body: map[string]string{"username": "bob", "email": "bob@example.test"}})
	people := peopleOf(t, srvA.Store, alice.User.ID)

	// The kubelet rotates the operator's projected token.
	second := mint()
	if second == first {
		t.Fatal("the TokenRequest API returned the same token twice")
	}
	writeTokenFile(t, operatorToken, second+"\n")
	rotatedAt := sent.count()

	// (4) The documented wrong recovery: the TerdutServer deleted and recreated, and with it
	// its Secret, while the database is kept. The operator holds no key: it resets and claims.
	a.DeleteSecret(kubeOperatorNS, kubeSecret)
	res := op.reconcile(t, client.ActionResetAndClaimed, 2)
	if res.RevokedAPIKeys != 1 {
		t.Errorf("recreated: revoked got %d, want 1 (the lost key)", res.RevokedAPIKeys)
	}
	keyWorksOnBoth("recreated: the lost key", key1, false)
	keyWorksOnBoth("recreated: the new key", res.APIKey.Key, true)
	wantSent := []string{"/api/bootstrap/reset " + fingerprint(second), "/api/bootstrap " + fingerprint(second)}
	if got := sent.since(rotatedAt); !slices.Equal(got, wantSent) {
		t.Errorf("after the rotation: sent %v, want %v (the rotated token, read from the file)", got, wantSent)
	}
	if got := sent.since(0)[0]; got != "/api/bootstrap "+fingerprint(first) {
		t.Errorf("the first claim: sent %s, want the first token", got)
	}
	personUntouched(t, "recreated", srvA, srvB, people, alice, session, laptop)

	// (5a) An administrator resets from the CLI (terdut-server bootstrap reset): the key in the
	// Secret is dead and the install pending; the next reconcile claims it.
	cliReset(t, srvA.Store)
	keyWorksOnBoth("CLI reset: the held key", op.heldKey(t), false)
	op.reconcile(t, client.ActionClaimed, 3)
	keyWorksOnBoth("reclaimed", op.heldKey(t), true)

	// (5b) Someone else resets and claims from the CLI: the install is complete and the key in
	// the Secret is stale (401): the next reconcile resets and claims again.
	stale := op.heldKey(t)
	cliReset(t, srvA.Store)
	cli, err := srvA.Store.Claim(t.Context(), store.AuditInfo{Actor: store.ActorCLI, RemoteAddr: "local"})
	if err != nil {
		t.Fatalf("CLI claim: %v", err)
	}
	res = op.reconcile(t, client.ActionResetAndClaimed, 5)
	if res.RevokedAPIKeys != 1 {
		t.Errorf("stale key: revoked got %d, want 1 (the CLI's key)", res.RevokedAPIKeys)
	}
	keyWorksOnBoth("stale key: the old Secret's key", stale, false)
	keyWorksOnBoth("stale key: the CLI's key", cli.Secret, false)
	keyWorksOnBoth("stale key: the new key", res.APIKey.Key, true)
	personUntouched(t, "stale key", srvA, srvB, people, alice, session, laptop)

	wantAuditTrail(t, srvA.Store)
	for _, line := range strings.Split(identityLogs.String(), "\n") {
		if strings.Contains(line, "another origin") {
			t.Logf("identity: %s", line)
			break
		}
	}
}

// mustCreated sends req, fails the test unless it answers 201, and returns the "key" of the
// answer (an API key's secret), if any.
func mustCreated(t *testing.T, srv *apitest.Server, req apitest.Request) string {
	t.Helper()
	resp := srv.MustDo(t, req)
	if resp.Status != http.StatusCreated {
		t.Fatalf("%s %s: got %d %s, want 201", req.Method, req.Path, resp.Status, resp.Body)
	}
	var body struct{ Key string }
	resp.JSON(t, &body)
	return body.Key
}

// peopleOf describes every person in the store and the API keys of the person id, all but
// what use changes (when a key was last used).
func peopleOf(t *testing.T, st *store.Store, id int64) string {
	t.Helper()
	users, err := st.Users(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := st.APIKeys(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, u := range users {
		if u.Kind == store.KindHuman {
			fmt.Fprintf(&b, "user %d %s %s %s password=%v %s\n", u.ID, u.Username, u.Email, u.Role, u.HasPassword, u.CreatedAt.UTC())
		}
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "key %d of %d %s %s expires=%v\n", k.ID, k.UserID, k.Name, k.CreatedAt.UTC(), k.ExpiresAt)
	}
	return b.String()
}

// personUntouched checks that a recovery changed nothing of alice's: the people and her keys
// in the store, her keys and session on both replicas, her password sign-in, the user she made.
func personUntouched(t *testing.T, step string, srvA, srvB *apitest.Server, want string, alice apitest.Person, session *http.Cookie, laptop string) {
	t.Helper()
	if got := peopleOf(t, srvA.Store, alice.User.ID); got != want {
		t.Errorf("%s: the people and alice's keys:\ngot\n%swant\n%s", step, got, want)
	}
	for name, srv := range map[string]*apitest.Server{"A": srvA, "B": srvB} {
		for what, req := range map[string]apitest.Request{
			"her first key":  {Method: http.MethodGet, Path: "/api/me", Bearer: alice.APIKey},
			"her laptop key": {Method: http.MethodGet, Path: "/api/me", Bearer: laptop},
			"her session":    {Method: http.MethodGet, Path: "/api/me", Cookie: session},
		} {
			if resp := srv.MustDo(t, req); resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"alice"`) {
				t.Errorf("%s: %s on replica %s: got %d %s, want 200 as alice", step, what, name, resp.Status, resp.Body)
			}
		}
	}
	srvA.MustLogin(t, "alice", alice.Password)
	if resp := srvB.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: laptop}); resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"bob"`) {
		t.Errorf("%s: the users alice lists: got %d %s, want 200 with bob", step, resp.Status, resp.Body)
	}
}

// cliReset resets the claim as `terdut-server bootstrap reset` does.
func cliReset(t *testing.T, st *store.Store) {
	t.Helper()
	if _, err := st.Reset(t.Context(), store.AuditInfo{Actor: store.ActorCLI, RemoteAddr: "local"}, store.RateLimit{}); err != nil {
		t.Fatalf("CLI reset: %v", err)
	}
}

// mustAudit returns the claim's audit, oldest first.
func mustAudit(t *testing.T, st *store.Store) []store.AuditEntry {
	t.Helper()
	entries, err := st.BootstrapAudit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// wantAuditTrail checks the claim's audit after the whole story: each of the operator's
// claims and resets says it proved itself with its service account, which one, from which
// pod; the CLI's have no method.
func wantAuditTrail(t *testing.T, st *store.Store) {
	t.Helper()
	byOperator := fmt.Sprintf("%s %s %s %s", store.ActorOperator, store.AuthServiceAccount, kubeOperatorSubj, kubeOperatorPod)
	byCLI := fmt.Sprintf("%s %s %s %s", store.ActorCLI, "", "", "")
	want := []string{
		"claim 1 " + byOperator,
		"reset 1 " + byOperator, "claim 2 " + byOperator,
		"reset 2 " + byCLI, "claim 3 " + byOperator,
		"reset 3 " + byCLI, "claim 4 " + byCLI, "reset 4 " + byOperator, "claim 5 " + byOperator,
	}
	var got []string
	for _, e := range mustAudit(t, st) {
		if e.Actor == store.ActorMigration {
			continue
		}
		got = append(got, fmt.Sprintf("%s %d %s %s %s %s", e.Action, e.Generation, e.Actor, e.Method, e.Subject, e.Pod))
		t.Logf("audit: %s %s gen %d by %s from %s method=%q subject=%q pod=%q", e.At.UTC().Format("15:04:05.000"),
			e.Action, e.Generation, e.Actor, e.RemoteAddr, e.Method, e.Subject, e.Pod)
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit:\ngot  %q\nwant %q", got, want)
	}
}
