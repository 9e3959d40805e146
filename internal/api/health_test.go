package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestReadyz_PublicSaysOnlyReady: /readyz, on the public port for the kubelet, tells anyone
// only ready or not: never the schema's versions, a SQLSTATE or a setting, which go to the
// log, once while they stay the same, and to terdut_not_ready{reason}. And it is cheap: one
// check answers every probe for ReadyCacheTTL, so a flood of probes does not cost the database
// a round trip each.
func TestReadyz_PublicSaysOnlyReady(t *testing.T) {
	db := pgtest.MustDatabase(t)
	readyz := func(srv *apitest.Server) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
	}
	cached := apitest.NewServer(t, db, func(o *api.Options) { o.ReadyCacheTTL = time.Hour })
	if r := readyz(cached); r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != `{"status":"ok"}` {
		t.Fatalf("readyz: got %d %s, want 200 {\"status\":\"ok\"}", r.Status, r.Body)
	}
	// The schema falls behind this binary (as if an older replica's database were restored).
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
		t.Fatal(err)
	}

	t.Run("OneCheckAnswersManyProbes", func(t *testing.T) {
		var wg sync.WaitGroup
		statuses := make([]int, 50)
		for i := range statuses {
			wg.Go(func() { statuses[i] = readyz(cached).Status })
		}
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusOK {
				t.Fatalf("probe %d within the check's TTL: got %d, want 200, the check's answer (no round trip of its own)", i, s)
			}
		}
	})
	t.Run("NoDetailForAnyone", func(t *testing.T) {
		fresh := apitest.NewServer(t, db, func(o *api.Options) { o.ReadyCacheTTL = time.Nanosecond })
		for range 3 {
			r := readyz(fresh)
			if body := strings.TrimSpace(string(r.Body)); r.Status != http.StatusServiceUnavailable || body != `{"status":"unavailable"}` {
				t.Fatalf("readyz with an outdated schema: got %d %s, want 503 {\"status\":\"unavailable\"} and nothing else", r.Status, body)
			}
		}
		lines := logLines(t, fresh, func(l logLine) bool { return l["msg"] == "not ready: /readyz answers 503" })
		if len(lines) != 1 || lines[0]["reason"] != "schema_outdated" ||
			!regexp.MustCompile(`not current.*at \d+, want \d+`).MatchString(lines[0]["detail"].(string)) {
			t.Errorf("log lines saying why: got %v, want one, reason schema_outdated, its detail naming both versions", lines)
		}
		metrics := string(fresh.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
		for _, want := range []string{`terdut_not_ready{reason="schema_outdated"} 1`, `terdut_not_ready{reason="database_unreachable"} 0`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics: got no %s", want)
			}
		}
	})
}
