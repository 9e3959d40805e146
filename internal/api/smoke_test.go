package api_test

import (
	"net/http"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

func TestSmoke_ClaimThenLogin(t *testing.T) {
	srv := newServer(t)
	p := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": "alice", "password": p.Password}})
	if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" {
		t.Fatalf("login while pending: got %d %s", resp.Status, resp.Body)
	}
	key := srv.MustClaim(t)
	c := srv.MustLogin(t, "alice", p.Password)
	me := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
	if me.Status != 200 {
		t.Fatalf("me: %d %s", me.Status, me.Body)
	}
	me = srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: key})
	if me.Status != 200 {
		t.Fatalf("users: %d %s", me.Status, me.Body)
	}
	t.Logf("%s", me.Body)
}
