package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// mustAddPeople adds n people named prefix-1… directly in the database, as a bulk load would
// (in a transaction marked as this version's, which decides the gate itself: migration 00010).
// A created_at is given to each when createdAt is not empty.
func mustAddPeople(t *testing.T, st *store.Store, prefix string, n int, createdAt string) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT set_config('terdut.gate', 'checked', true)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO users (username, email, created_at)
		SELECT $1 || '-' || i, $1 || '-' || i || '@example.test', coalesce(nullif($3, '')::timestamptz, now())
		FROM generate_series(1, $2) i`, prefix, n, createdAt); err != nil {
		t.Fatalf("add %d people: %v", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// wantAllUsers is what encoding/json writes for every user, oldest first: the answer of
// GET /api/users before it streamed, byte for byte.
func wantAllUsers(t *testing.T, st *store.Store) []byte {
	t.Helper()
	users, err := st.Users(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type userJSON struct {
		ID        int64  `json:"id"`
		Username  string `json:"username"`
		Email     string `json:"email"`
		Role      string `json:"role"`
		Kind      string `json:"kind"`
		SSO       bool   `json:"sso"`
		CreatedAt any    `json:"created_at"`
	}
	all := make([]userJSON, 0, len(users))
	for _, u := range users {
		all = append(all, userJSON{u.ID, u.Username, u.Email, string(u.Role), string(u.Kind), u.SSO(), u.CreatedAt})
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestUserList_Stream: without paging parameters, the whole list in one JSON array, the bytes
// encoding/json writes for it, at sizes on either side of the batches the server reads.
func TestUserList_Stream(t *testing.T) {
	e := newCoreEnv(t, nil)
	have := 4 // the principal, admin, alice and bob
	for _, total := range []int{4, 999, 1000, 1001, 2000, 2345} {
		mustAddPeople(t, e.srv.Store, fmt.Sprintf("to%d", total), total-have, "")
		have = total
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.admin.APIKey})
		if resp.Status != http.StatusOK {
			t.Fatalf("%d users: got status %d, want 200: %s", total, resp.Status, resp.Body)
		}
		if want := wantAllUsers(t, e.srv.Store); string(resp.Body) != string(want) {
			t.Fatalf("%d users: got %d bytes, want the %d bytes encoding/json writes for the list", total, len(resp.Body), len(want))
		}
		var users []struct{ ID int64 }
		resp.JSON(t, &users)
		if len(users) != total || !slices.IsSortedFunc(users, func(a, b struct{ ID int64 }) int { return int(a.ID - b.ID) }) {
			t.Fatalf("%d users: got %d, sorted %v, want %d in order of id", total, len(users),
				slices.IsSortedFunc(users, func(a, b struct{ ID int64 }) int { return int(a.ID - b.ID) }), total)
		}
		if got := resp.Header.Get("Link"); got != "" {
			t.Errorf("%d users, the whole list: got Link %q, want none", total, got)
		}
		if got := resp.Header.Get("Content-Type"); got != "application/json; charset=utf-8" {
			t.Errorf("Content-Type: got %q", got)
		}
	}
}

var nextLink = regexp.MustCompile(`^</api/users\?limit=([0-9]+)&after=([0-9]+)>; rel="next"$`)

// TestUserList_Pages: following the Link headers from the first page reads every user once,
// in order, pages of at most limit, the last without a Link.
func TestUserList_Pages(t *testing.T) {
	e := newCoreEnv(t, nil)
	mustAddPeople(t, e.srv.Store, "p", 246, "") // 250 in all
	var all []struct{ ID int64 }
	if err := json.Unmarshal(wantAllUsers(t, e.srv.Store), &all); err != nil || len(all) != 250 {
		t.Fatalf("the list: %v, %d users, want 250", err, len(all))
	}
	for _, tt := range []struct {
		first string
		pages int
	}{
		{"/api/users?limit=7", 36},
		{"/api/users?limit=250", 1}, // exactly the whole: no next page
		{"/api/users?limit=249", 2},
		{"/api/users?limit=1000", 1},
		{"/api/users?after=0", 3}, // the default limit, 100
		{"/api/users?limit=1", 250},
	} {
		var got []struct{ ID int64 }
		path, pages := tt.first, 0
		for path != "" {
			resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.admin.APIKey})
			if resp.Status != http.StatusOK {
				t.Fatalf("%s: got status %d, want 200: %s", path, resp.Status, resp.Body)
			}
			var page []struct{ ID int64 }
			resp.JSON(t, &page)
			got, path, pages = append(got, page...), "", pages+1
			if link := resp.Header.Get("Link"); link != "" {
				m := nextLink.FindStringSubmatch(link)
				if m == nil || m[2] != fmt.Sprint(page[len(page)-1].ID) {
					t.Fatalf("Link: got %q, want the next page after id %d", link, page[len(page)-1].ID)
				}
				path = strings.TrimSuffix(strings.TrimPrefix(strings.Fields(link)[0], "<"), ">;")
			}
		}
		if pages != tt.pages || !slices.Equal(got, all) {
			t.Errorf("from %s: got %d users in %d pages, want the %d users in order in %d pages", tt.first, len(got), pages, len(all), tt.pages)
		}
	}

	t.Run("Empty", func(t *testing.T) {
		last := all[len(all)-1].ID
		for _, path := range []string{fmt.Sprintf("/api/users?after=%d", last), "/api/users?after=9000000000000&limit=5"} {
			resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.admin.APIKey})
			if resp.Status != http.StatusOK || string(resp.Body) != "[]\n" || resp.Header.Get("Link") != "" {
				t.Errorf("%s: got %d %q Link %q, want 200 [] and no Link", path, resp.Status, resp.Body, resp.Header.Get("Link"))
			}
		}
	})

	t.Run("Members", func(t *testing.T) {
		// Members page through the roster as admins page through the list.
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users?limit=2", Bearer: e.alice.APIKey})
		wantRoster(t, resp)
		if !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
			t.Errorf("a member's first page of 2: Link %q, want a next page", resp.Header.Get("Link"))
		}
	})

	t.Run("BadQuery", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=1001", "limit=-1", "limit=abc", "limit=", "limit=1.5",
			"after=-1", "after=abc", "after=1.5", "after=", "after=99999999999999999999", "limit=5&after=x"} {
			resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users?" + q, Bearer: e.admin.APIKey})
			wantAPIError(t, resp, http.StatusBadRequest, "invalid_query")
			var body struct{ Error string }
			resp.JSON(t, &body)
			if !strings.Contains(body.Error, "limit") && !strings.Contains(body.Error, "after") {
				t.Errorf("%s: got error %q, want it to name the parameter", q, body.Error)
			}
		}
	})
}

// TestUserList_ErrorMidStream: a failure after the answer began (here a user whose created_at
// JSON cannot write, read in the second batch) aborts the connection: the client gets a
// truncated body that is not valid JSON, never a complete-looking shorter list. The same
// failure in the first batch, before anything was written, is an ordinary 500.
func TestUserList_ErrorMidStream(t *testing.T) {
	t.Run("Aborted", func(t *testing.T) {
		e := newCoreEnv(t, nil)
		mustAddPeople(t, e.srv.Store, "p", 1500, "")
		mustAddPeople(t, e.srv.Store, "year", 1, "10000-01-01T00:00:00Z")
		mustAddPeople(t, e.srv.Store, "q", 10, "")
		resp, err := e.srv.Do(apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.admin.APIKey})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reading the answer: got %v, want %v (the connection aborted)", err, io.ErrUnexpectedEOF)
		}
		if resp.Status != http.StatusOK || len(resp.Body) == 0 {
			t.Fatalf("got status %d and %d bytes, want 200 and the first batch", resp.Status, len(resp.Body))
		}
		var users []json.RawMessage
		if err := json.Unmarshal(resp.Body, &users); err == nil {
			t.Fatalf("the truncated answer decodes as %d users: a client would take it for the whole list", len(users))
		}
		if logs := e.srv.Logs.String(); !strings.Contains(logs, "user list aborted after its answer began") {
			t.Errorf("logs: want the abort logged, got:\n%s", logs)
		}
		// Paging answers the same failure as a 500 of its own, before any byte.
		resp = e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users?limit=1000&after=1000", Bearer: e.admin.APIKey})
		wantAPIError(t, resp, http.StatusInternalServerError, "internal")
	})

	t.Run("FirstBatch", func(t *testing.T) {
		e := newCoreEnv(t, nil)
		mustAddPeople(t, e.srv.Store, "year", 1, "10000-01-01T00:00:00Z")
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.admin.APIKey})
		wantAPIError(t, resp, http.StatusInternalServerError, "internal")
	})
}

// TestUserList_SlowReader: a client that stops reading a long list holds no database
// connection: the server reads a batch, lets its connection go, and waits on the client with
// none. The list is far larger than the sockets' buffers, so the server is blocked writing
// it while the test watches the pool; it then reads the rest and gets the whole list.
func TestUserList_SlowReader(t *testing.T) {
	e := newCoreEnv(t, nil)
	const people = 200000 // about 30 MB of JSON
	mustAddPeople(t, e.srv.Store, "p", people, "")
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/api/users", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Nothing read past the headers. A server that held its connection while it waited on
	// the client would hold it until the client read on: the wait below would never end,
	// and the test's deadline would say so.
	pool := e.srv.Store.Pool()
	for pool.Stat().AcquiredConns() != 0 {
		time.Sleep(time.Millisecond)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the list: %v", err)
	}
	var users []json.RawMessage
	if err := json.Unmarshal(body, &users); err != nil || len(users) != people+4 {
		t.Fatalf("got %d users (%v), want %d", len(users), err, people+4)
	}
}
