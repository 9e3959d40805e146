//go:build browser

package browsertest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestBrowser_OpenClaimPendingPage: on an install no operator will claim (no operator token,
// no operator issuer: make run's), a sign-in before the claim lands on a page that says how
// to claim it, not to wait for an operator.
func TestBrowser_OpenClaimPendingPage(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens = nil })
	b := newBrowser(t, srv.URL)
	b.open("/login")
	resp := passwordSignIn(b, "alice", "tulip anchor violet meteor")
	if resp.Status != http.StatusServiceUnavailable {
		t.Errorf("sign-in before the claim: got %d, want 503", resp.Status)
	}
	if got := b.text("pending"); !strings.Contains(got, "not claimed yet") || strings.Contains(got, "by its operator") {
		t.Errorf("pending page: got %q, want it to say the install is not claimed, not to wait for an operator", got)
	}
	got := b.text("claim-commands")
	for _, want := range []string{"terdut-server bootstrap claim", "curl -X POST " + srv.URL + "/api/bootstrap"} {
		if !strings.Contains(got, want) {
			t.Errorf("pending page: got %q, want it to contain %q", got, want)
		}
	}
	b.screenshot("open-claim")
}
