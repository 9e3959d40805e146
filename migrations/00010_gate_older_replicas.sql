-- +goose Up
-- The gate holds against replicas of a version that predates it. During a rolling upgrade
-- those replicas keep running, and they create people and sessions with plain INSERTs that
-- never look at bootstrap_state: while the install is pending (a fresh install, or one just
-- reset), they would sign people in, provision single sign-on people and let an older claim
-- take the principal's name. So while it is pending, the database itself refuses every new
-- user and session whose transaction has not said that it decided the gate: this version's
-- store says so with set_config('terdut.gate', 'checked', true) in the statement that takes
-- the gate's lock (or, where it inserts with the gate off, or as an admin's API request may
-- while pending, in the insert's own statement). The marker is local to the transaction.
-- The claim row is read FOR SHARE, so an older replica's insert that races a claim or a reset
-- is decided under the same lock as this version's sign-ins. A transaction that carries the
-- marker pays one current_setting() per row and reads nothing.
-- +goose StatementBegin
CREATE FUNCTION refuse_ungated_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    st TEXT;
BEGIN
    IF current_setting('terdut.gate', true) IS NOT DISTINCT FROM 'checked' THEN
        RETURN NEW;
    END IF;
    SELECT state INTO st FROM bootstrap_state FOR SHARE;
    IF st IS DISTINCT FROM 'complete' THEN
        RAISE EXCEPTION 'terdut-server is not claimed yet: a new row in % is refused until the install is claimed (an older terdut-server replica, or a hand-written INSERT, does not check the bootstrap gate)', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Finish the upgrade (every replica at the version that migrated to 00010) and claim the install; see docs/bootstrap.md#upgrading-an-existing-install.';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER users_gate BEFORE INSERT ON users
    FOR EACH ROW EXECUTE FUNCTION refuse_ungated_insert();
CREATE TRIGGER sessions_gate BEFORE INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION refuse_ungated_insert();

-- +goose Down
DROP TRIGGER sessions_gate ON sessions;
DROP TRIGGER users_gate ON users;
DROP FUNCTION refuse_ungated_insert();
