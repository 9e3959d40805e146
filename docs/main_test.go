package docs

import (
	"context"
	"testing"

	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/store"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func(ctx context.Context, url string) error {
		_, err := store.Migrate(ctx, url)
		return err
	})
}
