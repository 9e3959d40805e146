package docs

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/store"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}
