// Package gogc sets the garbage collector's target of terdut-server's processes.
//
// Go's default (GOGC=100) lets the heap grow to twice what is live, and to at least 4 MB,
// between two collections. terdut-server's live heap is about 1 MB, so it collected every
// 3 MB allocated, every few hundred API-key requests, and each collection marks the whole
// program, whatever it allocated. At 400 the heap grows to five times what is live, at least
// 16 MB, and an API-key request costs 3-4 us less CPU, about 5% (bench/README.md). GOGC
// and GOMEMLIMIT in the environment still rule: an operator who sets GOGC gets what it
// says, and GOMEMLIMIT bounds the heap in a small container whatever the target.
package gogc

import (
	"runtime/debug"
)

// Default is the collector's target, as GOGC would give it, when GOGC is not set.
const Default = 400

// Set makes Default the collector's target unless getenv("GOGC") sets one, which the runtime
// has read already.
func Set(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(Default)
	}
}
