package api_test

import (
	"context"
	"testing"

	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/store"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func(ctx context.Context, url string) error {
		_, err := store.Migrate(ctx, url)
		return err
	})
}

// newServer starts one instance on a fresh database.
func newServer(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.NewServer(t, pgtest.MustDatabase(t), nil)
}
