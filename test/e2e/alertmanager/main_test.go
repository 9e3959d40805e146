// Package alertmanager tests terdut-server fed by a real Prometheus Alertmanager (v0.35.0,
// test/harness/amtest) end to end: Alertmanager groups, repeats, truncates, silences and
// clusters as it does in production, its webhook reaches real servers over a real store
// (test/harness/apitest), and every assertion reads the server's state through its HTTP API,
// or its tables where the API does not show what is promised (one row per fingerprint).
//
// The first run on a machine builds Alertmanager (minutes; see amtest.Build); a test fails,
// never skips, when it cannot be built. Everything listens on 127.0.0.1 and is stopped when
// its test ends.
package alertmanager

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}
