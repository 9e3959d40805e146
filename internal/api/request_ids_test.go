package api_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestAudit_RequestIDs: the record names each request by the server's own id, whatever the
// client sends, so that a leaked key cannot take the id of another admin's request and blur
// the record; a client's X-Request-Id is kept beside it, marked as the client's
// (client_request_id), in audit_events and in the log. Claims and resets are rows like the
// others: the request's id and the client's address (through --trusted-proxies), not the
// proxy's.
func TestAudit_RequestIDs(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	const client = "198.51.100.7"
	as := func(id string) http.Header {
		return http.Header{"X-Request-Id": {id}, "X-Forwarded-For": {client}}
	}
	claim := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken,
		Header: as("claim-by-operator")})
	wantStatus(t, claim, http.StatusCreated)
	var body struct {
		APIKey struct{ Key string } `json:"api_key"`
	}
	claim.JSON(t, &body)
	key := body.APIKey.Key
	// An admin's request, then another whose client reuses its id.
	first := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key, Header: as("admin-req-1"),
		Body: map[string]string{"username": "alice", "email": "alice@example.test"}})
	wantStatus(t, first, http.StatusCreated)
	second := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key, Header: as("admin-req-1"),
		Body: map[string]string{"username": "bob", "email": "bob@example.test"}})
	wantStatus(t, second, http.StatusCreated)
	reset := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken,
		Header: as("reset-by-operator")})
	wantStatus(t, reset, http.StatusOK)

	ids := map[string]bool{}
	for _, r := range []apitest.Response{claim, first, second, reset} {
		id := r.Header.Get("X-Request-Id")
		if id == "" || id == "claim-by-operator" || id == "admin-req-1" || id == "reset-by-operator" || ids[id] {
			t.Errorf("answer's X-Request-Id: got %q, want the server's own id, one for each request", id)
		}
		ids[id] = true
	}

	page := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit?limit=10", Bearer: apitest.MustPerson(t, srv.Store, "root", "admin").APIKey})
	wantStatus(t, page, http.StatusOK)
	var events struct {
		Events []struct {
			Event           string
			TargetName      string `json:"target_name"`
			RemoteAddr      string `json:"remote_addr"`
			RequestID       string `json:"request_id"`
			ClientRequestID string `json:"client_request_id"`
		}
	}
	page.JSON(t, &events)
	want := map[string]struct {
		resp      apitest.Response
		clientsID string
	}{
		"bootstrap.claim": {claim, "claim-by-operator"}, "bootstrap.reset": {reset, "reset-by-operator"},
		"user.created alice": {first, "admin-req-1"}, "user.created bob": {second, "admin-req-1"},
	}
	for _, e := range events.Events {
		name := e.Event
		if e.Event == "user.created" {
			name += " " + e.TargetName
		}
		w, ok := want[name]
		if !ok {
			continue
		}
		delete(want, name)
		if e.RequestID != w.resp.Header.Get("X-Request-Id") || e.ClientRequestID != w.clientsID || e.RemoteAddr != client {
			t.Errorf("%s: got request_id %q, client_request_id %q, remote_addr %q; want %q (the server's), %q, %q",
				name, e.RequestID, e.ClientRequestID, e.RemoteAddr, w.resp.Header.Get("X-Request-Id"), w.clientsID, client)
		}
	}
	for name := range want {
		t.Errorf("%s: no audit row", name)
	}
	created := securityEvents(t, srv, "user.created")
	if l := created[len(created)-1]; l["request_id"] != second.Header.Get("X-Request-Id") || l["client_request_id"] != "admin-req-1" {
		t.Errorf("user.created line: got request_id %v, client_request_id %v, want %q (the server's), admin-req-1",
			l["request_id"], l["client_request_id"], second.Header.Get("X-Request-Id"))
	}
}
