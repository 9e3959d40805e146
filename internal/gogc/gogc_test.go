package gogc_test

import (
	"runtime/debug"
	"testing"

	"github.com/terdut-server/terdut-server/internal/gogc"
)

func TestSet(t *testing.T) {
	initial := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(initial) })
	env := func(gogcValue string) func(string) string {
		return func(key string) string {
			if key == "GOGC" {
				return gogcValue
			}
			return ""
		}
	}

	// Unset: the default.
	debug.SetGCPercent(100)
	gogc.Set(env(""))
	if got := debug.SetGCPercent(100); got != gogc.Default {
		t.Fatalf("target after Set without GOGC: %d, want %d", got, gogc.Default)
	}

	// Set: the runtime read it at start (here, what the test sets in its place) and Set
	// leaves it alone.
	for _, percent := range []int{150, -1} {
		debug.SetGCPercent(percent)
		gogc.Set(env("150"))
		if got := debug.SetGCPercent(100); got != percent {
			t.Fatalf("target after Set with GOGC set: %d, want %d (unchanged)", got, percent)
		}
	}
}
