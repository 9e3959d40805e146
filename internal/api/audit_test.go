package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

type auditPage struct {
	Events []struct {
		ID         int64
		Event      string
		ActorKind  string `json:"actor_kind"`
		ActorID    *int64 `json:"actor_id"`
		ActorName  string `json:"actor_name"`
		TargetID   *int64 `json:"target_id"`
		RemoteAddr string `json:"remote_addr"`
		RequestID  string `json:"request_id"`
		Detail     string
	}
	NextBefore *int64 `json:"next_before"`
}

func (p auditPage) names() []string {
	var out []string
	for _, e := range p.Events {
		out = append(out, e.Event)
	}
	return out
}

// mustAudit reads GET /api/audit with the query as the holder of key.
func mustAudit(t *testing.T, srv *apitest.Server, key, query string) auditPage {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit" + query, Bearer: key})
	if resp.Status != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /api/audit%s: got %d %s (Cache-Control %q), want 200, no-store", query, resp.Status, resp.Body,
			resp.Header.Get("Cache-Control"))
	}
	var p auditPage
	resp.JSON(t, &p)
	return p
}

// TestAudit: admins read the administrative actions newest first, a page at a time, filtered
// by actor and event; after a reset, the principal's actions read beside the claim and the
// reset; nobody else reads them.
func TestAudit(t *testing.T) {
	srv := newServer(t)
	key := srv.MustClaim(t)
	principal := mustUserID(t, srv, store.PrincipalUsername)
	var ids []int64
	for _, name := range []string{"ann", "ben", "cat"} {
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key,
			Body: map[string]string{"username": name, "email": name + "@example.test"}})
		wantStatus(t, resp, http.StatusCreated)
		var u struct{ ID int64 }
		resp.JSON(t, &u)
		ids = append(ids, u.ID)
	}
	wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/users/%d/api-keys", ids[0]),
		Bearer: key, Body: map[string]string{"name": "ci"}}), http.StatusCreated)
	wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken}),
		http.StatusOK)
	// The reset revoked the principal's key: the claim after it gives the admin who reads.
	admin := srv.MustClaim(t)

	all := mustAudit(t, srv, admin, "")
	want := []string{"bootstrap.claim", "bootstrap.reset", "api_key.created", "user.created", "user.created", "user.created",
		"bootstrap.claim", "bootstrap.backfill"}
	if !slices.Equal(all.names(), want) || all.NextBefore != nil {
		t.Fatalf("every event: got %v (next %v), want %v and no next page", all.names(), all.NextBefore, want)
	}
	created := all.Events[3]
	if created.ActorKind != "user" || created.ActorID == nil || *created.ActorID != principal || created.TargetID == nil ||
		*created.TargetID != ids[2] || created.RemoteAddr != "127.0.0.1" || created.RequestID == "" {
		t.Errorf("user.created: got %+v, want the principal %d creating user %d from 127.0.0.1, with a request id",
			created, principal, ids[2])
	}
	reset := all.Events[1]
	if reset.ActorKind != "operator" || reset.ActorName != "operator_token" || reset.RemoteAddr != "127.0.0.1" {
		t.Errorf("bootstrap.reset: got %+v, want the operator by its token from 127.0.0.1", reset)
	}

	t.Run("Pages", func(t *testing.T) {
		// 8 events: pages of 3 end on a short page, pages of 4 and of 8 on a full one,
		// which is the last all the same: its next_before is null.
		for limit, wantPages := range map[int]int{3: 3, 4: 2, 8: 1, 500: 1} {
			var got []string
			query := fmt.Sprintf("?limit=%d", limit)
			pages := 0
			for ; ; pages++ {
				if pages > len(want) {
					t.Fatalf("limit %d: more pages than events", limit)
				}
				p := mustAudit(t, srv, admin, query)
				got = append(got, p.names()...)
				if p.NextBefore == nil {
					break
				}
				if len(p.Events) != limit {
					t.Fatalf("limit %d: a page of %d events has a next page", limit, len(p.Events))
				}
				query = fmt.Sprintf("?limit=%d&before=%d", limit, *p.NextBefore)
			}
			if !slices.Equal(got, want) || pages+1 != wantPages {
				t.Errorf("limit %d: got %v in %d pages, want %v in %d", limit, got, pages+1, want, wantPages)
			}
		}
	})

	t.Run("Filters", func(t *testing.T) {
		for query, want := range map[string][]string{
			fmt.Sprintf("?actor=%d", principal):                 {"api_key.created", "user.created", "user.created", "user.created"},
			"?actor=operator":                                   {"bootstrap.claim", "bootstrap.reset", "bootstrap.claim"},
			"?event=api_key.created":                            {"api_key.created"},
			"?event=bootstrap.*":                                {"bootstrap.claim", "bootstrap.reset", "bootstrap.claim", "bootstrap.backfill"},
			fmt.Sprintf("?actor=%d&event=api_key.*", principal): {"api_key.created"},
		} {
			if got := mustAudit(t, srv, admin, query).names(); !slices.Equal(got, want) {
				t.Errorf("%s: got %v, want %v", query, got, want)
			}
		}
		for _, query := range []string{"?limit=0", "?limit=501", "?before=-1", "?actor=someone", "?event=DROP%20TABLE", "?limit=x"} {
			wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit" + query, Bearer: admin}),
				http.StatusBadRequest, "invalid_query")
		}
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		member := apitest.MustPerson(t, srv.Store, "mo", store.RoleMember)
		wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit", Bearer: member.APIKey}),
			http.StatusForbidden, "forbidden")
		wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit"}),
			http.StatusUnauthorized, "unauthorized")
		wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/audit", Bearer: apitest.OperatorToken}),
			http.StatusUnauthorized, "unauthorized")
	})
}
