package store

import "time"

// SetLockLeaseForTest shortens the migration lock's lease and heartbeat, and sets a hook that
// runs once the lock is held, for a test process that plays a replica killed holding it.
func SetLockLeaseForTest(lease, heartbeat time.Duration, acquired func()) {
	lockLease, lockHeartbeat, lockAcquired = lease, heartbeat, acquired
}
