//go:build image

package image

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"

	"github.com/terdut-server/terdut-server/client"
)

// TestImage_AsKubernetesRunsIt walks an install of the image through its life: the
// operator claims it, a person signs in on the other replica, the CLI answers through
// docker exec as through kubectl exec, and docker stop drains a request in flight.
func TestImage_AsKubernetesRunsIt(t *testing.T) {
	in := newInstall(t)
	a := in.startReplica(t, "a")
	b := in.startReplica(t, "b") // shares nothing with a but the database
	ctx := context.Background()

	// The operator claims the install through a's operator port, as terdut-operator does with
	// the example manifests, and checks its key on the people's port.
	op, err := client.New(a.url, client.WithOperatorURL(a.op), client.WithOperatorToken(in.operatorToken))
	if err != nil {
		t.Fatal(err)
	}
	res, err := op.Reconcile(ctx, "")
	if err != nil {
		t.Fatalf("Reconcile: %v%s", err, logsOf(a.ctr))
	}
	if res.Action != client.ActionClaimed || res.APIKey.Key == "" {
		t.Fatalf("Reconcile: got %s (key set: %v), want %s with a key", res.Action, res.APIKey.Key != "", client.ActionClaimed)
	}
	// The people's port does not serve the operator's endpoints.
	call(t, a.url, http.MethodPost, "/api/bootstrap/reset", "Bearer "+in.operatorToken, "", "", http.StatusNotFound, nil)
	// b sees the claim.
	opB, _ := client.New(b.url, client.WithOperatorURL(b.op), client.WithOperatorToken(in.operatorToken))
	if st, err := opB.Status(ctx); err != nil || st.State != client.StateComplete {
		t.Fatalf("status on b: got %+v, %v, want complete", st, err)
	}

	// The claim's key makes a person with a password; the person signs in on b and is
	// known on a.
	key := res.APIKey.Key
	var user client.User
	call(t, a.url, http.MethodPost, "/api/users", "Bearer "+key, "",
		`{"username":"alice","email":"alice@example.test","role":"member"}`, http.StatusCreated, &user)
	call(t, a.url, http.MethodPut, fmt.Sprintf("/api/users/%d/password", user.ID), "Bearer "+key, "",
		`{"password":"amber lantern drifts north"}`, http.StatusNoContent, nil)
	cookie := signIn(t, b.url, "alice", "amber lantern drifts north")
	var me struct {
		User client.User `json:"user"`
	}
	call(t, a.url, http.MethodGet, "/api/me", "", cookie, "", http.StatusOK, &me)
	if me.User.Username != "alice" {
		t.Fatalf("GET /api/me on a with b's session: got %q, want alice", me.User.Username)
	}

	// terdut-server bootstrap status, in the container, as `kubectl exec` runs it.
	code, out, err := a.ctr.Exec(ctx, []string{"terdut-server", "bootstrap", "status"}, tcexec.Multiplexed())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out)
	var status struct {
		State      string `json:"state"`
		Generation int64  `json:"generation"`
	}
	if code != 0 || json.Unmarshal(lastJSON(body), &status) != nil || status.State != "complete" || status.Generation != 1 {
		t.Fatalf("docker exec a terdut-server bootstrap status: exit %d, output:\n%s\nwant exit 0 and state complete, generation 1", code, body)
	}

	t.Run("StopDrains", func(t *testing.T) { testStopDrains(t, a, "alice", "amber lantern drifts north") })
}

// testStopDrains stops replica r with docker stop while a sign-in is in flight (its body
// half sent): the sign-in still gets its answer, and the server exits 0 within the grace
// period.
func testStopDrains(t *testing.T, r *replica, username, password string) {
	ctx := context.Background()
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
	half := len(body) / 2
	fmt.Fprintf(conn, "POST /api/auth/login HTTP/1.1\r\nHost: terdut.image.test\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:half])
	time.Sleep(300 * time.Millisecond) // the handler is reading the body

	const grace = 30 * time.Second // terminationGracePeriodSeconds
	stopped := make(chan error, 1)
	begin := time.Now()
	go func() {
		timeout := grace
		stopped <- r.ctr.Stop(ctx, &timeout)
	}()
	waitLog(t, r.ctr, "shutting down: draining requests in flight")
	if _, err := io.WriteString(conn, body[half:]); err != nil {
		t.Fatalf("send the rest of the sign-in after SIGTERM: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the sign-in in flight got no answer after SIGTERM: %v%s", err, logsOf(r.ctr))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) == 0 {
		t.Errorf("the sign-in in flight: got %d with %d cookies, want 200 and a session cookie", resp.StatusCode, len(resp.Cookies()))
	}
	if err := <-stopped; err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	took := time.Since(begin)
	st, err := r.ctr.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExitCode != 0 || took >= grace {
		t.Errorf("docker stop: exit code %d after %s, want 0 within %s (a SIGKILL is 137)%s", st.ExitCode, took, grace, logsOf(r.ctr))
	}
	if logs := logsOf(r.ctr); !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("the server's output has no line saying it stopped:%s", logs)
	}
	t.Logf("docker stop: the sign-in in flight answered %d; the server exited %d in %s", resp.StatusCode, st.ExitCode, took.Round(time.Millisecond))
}

// waitLog waits until the container's output holds s.
func waitLog(t *testing.T, ctr testcontainers.Container, s string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logsOf(ctr), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the container never said %q%s", s, logsOf(ctr))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signIn signs a person in with a password and returns the session cookie's name=value.
func signIn(t *testing.T, base, username, password string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	resp, err := http.Post(base+"/api/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) == 0 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("sign in as %s: got %d with %d cookies (%s), want 200 and a session cookie", username, resp.StatusCode, len(resp.Cookies()), b)
	}
	c := resp.Cookies()[0]
	return c.Name + "=" + c.Value
}

// call sends a JSON request and decodes the answer into out unless it is nil.
func call(t *testing.T, base, method, path, authorization, cookie, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: got %d (%s), want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// lastJSON returns the output from its first '{': the CLI may log lines before its answer.
func lastJSON(b []byte) []byte {
	if i := bytes.IndexByte(b, '{'); i >= 0 {
		return b[i:]
	}
	return b
}
