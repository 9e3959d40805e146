//go:build browser

// Package browsertest drives terdut-server's sign-in pages with a real headless
// Chromium, as a person would use them: the single sign-on button against the
// in-process OIDC provider, the "still being set up" page while the install is
// unclaimed, the password form, and signing out.
//
// The tests need Debian's chromium package (/usr/bin/chromium, or the binary
// named by $CHROMIUM); scripts/ensure-chromium.sh installs it, and `make e2e`
// runs that script first. Without the browser the tests fail, they never skip.
// Screenshots of the pages go to test/browsertest/out/ (ignored by git).
package browsertest

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}
