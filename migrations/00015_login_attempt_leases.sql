-- +goose Up
-- A check reserved against the guessing limit is no longer a failed guess until it is given
-- back: it is held in pending, where it counts against the limit only for a short lease (the
-- longest a check can take), and moves to attempts (the failed guesses) only when its password
-- was checked and found wrong. A sign-in cut off by a failover between its reservation and
-- its outcome, when nothing can be written, then costs the person nothing once the lease ends.
-- Replicas of the previous version, during a rolling upgrade, still reserve in attempts (and
-- give back there); their INSERTs leave pending empty.
ALTER TABLE login_attempts ADD COLUMN pending TIMESTAMPTZ[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE login_attempts DROP COLUMN pending;
