package api_test

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}

// newServer starts one instance on a fresh database.
func newServer(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.NewServer(t, pgtest.MustDatabase(t), nil)
}
