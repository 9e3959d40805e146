package opjwt

import "time"

// SetKeyClock makes v's key set read the time from now: when the keys were read, and how long
// ago. Call it before v verifies anything.
func SetKeyClock(v *Verifier, now func() time.Time) { v.keys.now = now }
