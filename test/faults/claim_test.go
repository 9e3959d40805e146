package faults

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// connect opens a connection of the test's own, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// holdAPIKeys blocks every insert into api_keys until release is called: a claim that
// reaches it has already created the principal in its transaction, so interrupting it
// there tests that nothing of a half-done claim survives.
func holdAPIKeys(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE api_keys IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// waitForBlockedInsert waits until a backend is waiting for the api_keys lock, and returns its pid.
func waitForBlockedInsert(t *testing.T, url string) int {
	t.Helper()
	conn := connect(t, url)
	var pid int
	waitFor(t, "a claim to reach its api_keys write", func() bool {
		return conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%api_keys%' LIMIT 1`).Scan(&pid) == nil
	})
	return pid
}

// waitNotBlocked waits until the backend pid no longer waits for a lock: its statement was
// cancelled, or its connection ended.
func waitNotBlocked(t *testing.T, url string, pid int) {
	t.Helper()
	conn := connect(t, url)
	waitFor(t, "the interrupted claim's statement to end", func() bool {
		var blocked bool
		if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock')`, pid).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		return !blocked
	})
}

// assertNothingClaimed checks the install is pending with no principal and no key.
func assertNothingClaimed(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, url)
	var state string
	var gen, users, keys int
	err := conn.QueryRow(ctx, `SELECT state, generation, (SELECT count(*) FROM users), (SELECT count(*) FROM api_keys)
		FROM bootstrap_state`).Scan(&state, &gen, &users, &keys)
	if err != nil {
		t.Fatal(err)
	}
	if state != "pending" || gen != 0 || users != 0 || keys != 0 {
		t.Fatalf("after the interrupted claim: got state %s generation %d, %d users, %d keys; want pending 0, no orphan user or key",
			state, gen, users, keys)
	}
}

func TestClaimInterrupted(t *testing.T) {
	for name, interrupt := range map[string]func(t *testing.T, url string, pid int, cancel context.CancelFunc){
		// The operator gives up: its request is cancelled while the claim is mid-transaction.
		"ClientCancels": func(t *testing.T, url string, pid int, cancel context.CancelFunc) { cancel() },
		// The database ends the claim's connection mid-transaction.
		"BackendTerminated": func(t *testing.T, url string, pid int, cancel context.CancelFunc) {
			if _, err := connect(t, url).Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cl := startCluster(t)
			srv := apitest.NewServer(t, cl.url(), nil)
			release := holdAPIKeys(t, cl.url())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := make(chan int, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/bootstrap", nil)
				req.Header.Set("Authorization", "Bearer "+apitest.OperatorToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					result <- 0
					return
				}
				resp.Body.Close()
				result <- resp.StatusCode
			}()
			pid := waitForBlockedInsert(t, cl.url())
			interrupt(t, cl.url(), pid, cancel)
			// The lock is held until the claim's statement has ended, so the interruption, not
			// the order in which a busy machine runs things, decides the claim's fate.
			waitNotBlocked(t, cl.url(), pid)
			status := <-result
			if status == http.StatusCreated {
				t.Fatalf("the interrupted claim answered 201")
			}
			release()
			waitIdle(t, cl.url())
			assertNothingClaimed(t, cl.url())
			srv.MustClaim(t)
		})
	}
}

// waitIdle waits until no other backend holds a transaction open (an aborted claim may
// still be rolling back when its client has already gone).
func waitIdle(t *testing.T, url string) {
	t.Helper()
	conn := connect(t, url)
	waitFor(t, "the interrupted claim's transaction to end", func() bool {
		var open int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND xact_start IS NOT NULL`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		return open == 0
	})
}

// TestReplicaKilledMidClaim kills a terdut-server process (SIGKILL, no chance to clean up)
// while its claim is mid-transaction; the claim must vanish whole and another replica claim.
func TestReplicaKilledMidClaim(t *testing.T) {
	cl := startCluster(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	apitest.WriteFile(t, tokenFile, apitest.OperatorToken+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(binary, "--listen", addr, "--password-hash-cost", "4")
	cmd.Env = append(os.Environ(), "TERDUT_DATABASE_URL="+cl.url(), "TERDUT_OPERATOR_TOKEN_FILE="+tokenFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHealthy(t, "http://"+addr)

	release := holdAPIKeys(t, cl.url())
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/bootstrap", nil)
		req.Header.Set("Authorization", "Bearer "+apitest.OperatorToken)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitForBlockedInsert(t, cl.url())
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	waitIdle(t, cl.url())
	assertNothingClaimed(t, cl.url())

	other := apitest.NewServer(t, cl.url(), nil)
	other.MustClaim(t)
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	waitFor(t, base+"/healthz to answer 200", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
