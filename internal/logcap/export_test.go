package logcap

import "time"

// SetClock makes l read the time from now. Call it before l is used.
func SetClock(l *Limiter, now func() time.Time) { l.clock = now }
