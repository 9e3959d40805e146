package api

import (
	"context"
	"errors"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/store"
)

// Passwords hashes and checks passwords with bcrypt at a fixed cost.
type Passwords struct {
	cost  int
	dummy []byte // a hash to check against when the user does not exist, so timing says nothing
}

// NewPasswords returns a hasher at the given bcrypt cost (bcrypt.DefaultCost when 0).
func NewPasswords(cost int) (*Passwords, error) {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("terdut-server dummy password"), cost)
	if err != nil {
		return nil, err
	}
	return &Passwords{cost: cost, dummy: dummy}, nil
}

// Hash returns the bcrypt hash of password.
func (p *Passwords) Hash(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), p.cost)
	return string(h), err
}

// Check reports whether password matches hash. An empty hash (no user, or no password)
// is checked against a dummy so that the answer takes as long either way. A password
// longer than bcrypt's 72 bytes never matches: bcrypt would ignore the rest, so a stored
// password followed by anything at all would otherwise be accepted too.
func (p *Passwords) Check(hash, password string) bool {
	if hash == "" || len(password) > maxPasswordBytes {
		_ = bcrypt.CompareHashAndPassword(p.dummy, []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// NeedsRehash reports whether hash was made at another cost than the configured one. A sign-in
// rehashes such a password, so that checking it takes as long as checking the dummy does for a
// name that does not exist: otherwise, after the cost is raised, timing tells the two apart.
func (p *Passwords) NeedsRehash(hash string) bool {
	cost, err := bcrypt.Cost([]byte(hash))
	return err == nil && cost != p.cost
}

// rehash stores password, just checked against oldHash, at the configured cost. It is best
// effort (the sign-in has succeeded either way) and runs to the end even if the client leaves.
// Like every bcrypt run it takes a check slot; with none free in time it hashes nothing: the
// next sign-in tries again.
func (s *server) rehash(ctx context.Context, id int64, oldHash, password string) {
	ctx = context.WithoutCancel(ctx)
	// Not hashPassword: a rehash left for later refuses nobody, so it is not counted as a
	// refusal.
	if !s.checks.acquire(ctx) {
		s.log.DebugContext(ctx, "rehash password at the configured cost: no check slot free, left for a later sign-in", "user_id", id)
		return
	}
	hash, err := s.passwords.Hash(password)
	s.checks.release()
	if err == nil {
		err = s.store.RehashPassword(ctx, id, oldHash, hash)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) { // not found: the password changed meanwhile
		s.log.WarnContext(ctx, "rehash password at the configured cost", "user_id", id, "err", err)
	}
}

var errWrongCurrentPassword = &apiError{Status: http.StatusForbidden, Code: "wrong_current_password",
	Message: "To change your own password, send your current password as current_password."}

// checkCurrentPassword checks that password is u's: guessing it is throttled like sign-in, on
// the same count, and checked in the same bcrypt slots. It returns wrong when it is not. A
// wrong password, or one refused past the guessing limit, is a failed authentication: a
// security event like a sign-in's (reauth.failed, reauth.locked_out). It returns the hash it
// checked the password against, for a change decided on it (store.PasswordRule.Proven).
func (s *server) checkCurrentPassword(r *http.Request, u store.User, password string, wrong *apiError) (string, error) {
	ctx := r.Context()
	_, current, attempt, err := s.store.UserForSignIn(ctx, u.Username, store.GateOff, s.opts.LoginLimit)
	var limited *store.RateLimitedError
	if errors.As(err, &limited) {
		s.event(r, "reauth.locked_out", outcomeRefused, target(u))
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	ok, err := s.checkPassword(ctx, current, password)
	if err != nil {
		s.releaseUnchecked(ctx, attempt)
		return "", err
	}
	if !ok {
		if err := s.store.FailedAttempt(context.WithoutCancel(ctx), attempt); err != nil {
			return "", err
		}
		s.event(r, "reauth.failed", outcomeFailed, target(u))
		return "", wrong
	}
	// Given back even if the client has gone: else it would hold a place under the limit
	// until its lease ends.
	if err := s.store.ReleaseAttempt(context.WithoutCancel(ctx), attempt); err != nil {
		return "", err
	}
	return current, nil
}

// recheckPassword is for a write that found the password hash it was decided on replaced
// (store.ErrPasswordChanged, or a sign-in's ErrNotFound): it returns the user's hash as it is
// now and whether password matches it. Another change replaced it, and then the password is
// no longer current; or a sign-in stored the same password at another --password-hash-cost,
// and then it still is. This check is neither throttled nor counted: a request gets here only
// through a counted check that found the same password right against the earlier hash a
// moment ago, so it is no guess, and a password the new hash refuses grants nothing. It reads
// the hash with store.PasswordHash, which reserves and sweeps nothing of the guessing limit's.
// It is checked once: a hash replaced again meanwhile answers as a changed password would. A
// person who cannot have a password has none here either.
func (s *server) recheckPassword(ctx context.Context, userID int64, password string) (string, bool, error) {
	hash, err := s.store.PasswordHash(ctx, userID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	case hash == "":
		return "", false, nil
	}
	ok, err := s.checkPassword(ctx, hash, password)
	return hash, ok, err
}

// changeAgainIfCurrent makes change once more, decided on the hash there now, when password
// is still current after the change found the hash it was decided on replaced (see
// recheckPassword); else it returns store.ErrPasswordChanged (403 wrong_current_password).
func (s *server) changeAgainIfCurrent(ctx context.Context, password string, change store.PasswordChange) error {
	hash, ok, err := s.recheckPassword(ctx, change.UserID, password)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrPasswordChanged
	}
	change.Rule = &store.PasswordRule{Proven: hash}
	_, err = s.store.ChangePassword(ctx, change)
	return err
}

// sessionAgainIfCurrent is the sign-in's changeAgainIfCurrent: it creates the session once
// more, against the hash there now, when password is still current after the first try found
// the hash it checked replaced; else store.ErrNotFound (401 invalid_credentials). It returns
// the hash the session was made against.
func (s *server) sessionAgainIfCurrent(ctx context.Context, userID int64, password string, a store.Attempt) (store.Session, string, error) {
	hash, ok, err := s.recheckPassword(ctx, userID, password)
	if err != nil {
		return store.Session{}, "", err
	}
	if !ok {
		return store.Session{}, "", store.ErrNotFound
	}
	sess, err := s.store.CreatePasswordSession(ctx, userID, hash, a, s.opts.SessionTTL, store.Gate(s.opts.Gate))
	return sess, hash, err
}

func (s *server) handlePasswordSet() http.Handler {
	type request struct {
		Password        string `json:"password"`
		CurrentPassword string `json:"current_password"`
		// RevokeAPIKeys also revokes every API key of the user, as a stolen session's keys should.
		RevokeAPIKeys bool `json:"revoke_api_keys"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := pathID(r, "id")
		caller := principalFrom(r.Context())
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := validatePassword(req.Password); err != nil {
			s.writeError(w, r, err)
			return
		}
		target, err := s.store.User(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if target.Kind == store.KindService {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Code: "service_user",
				Message: "Machine users have no password; they act only through API keys."})
			return
		}
		if target.SSO() {
			// A password would outlive the provider's group rules and role, checked only at SSO sign-in.
			s.writeError(w, r, errSSOUserPassword)
			return
		}
		// What the change is decided on, checked again as it is written (a quarter of a second
		// of hashing later): see store.PasswordRule.
		rule := &store.PasswordRule{ByOther: caller.User.ID != id}
		if rule.ByOther {
			if err := refuseOthersPassword(caller, target); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if !rule.ByOther && target.HasPassword {
			if rule.Proven, err = s.checkCurrentPassword(r, target, req.CurrentPassword, errWrongCurrentPassword); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		hash, err := s.hashPassword(r.Context(), req.Password)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		keep := ""
		if !rule.ByOther {
			keep = caller.SessionToken
		}
		change := store.PasswordChange{UserID: id, Hash: hash, KeepSession: keep, RevokeAPIKeys: req.RevokeAPIKeys, Rule: rule}
		_, err = s.store.ChangePassword(r.Context(), change)
		if errors.Is(err, store.ErrPasswordChanged) && rule.Proven != "" {
			err = s.changeAgainIfCurrent(r.Context(), req.CurrentPassword, change)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "user.password_set", TargetID: id, TargetName: target.Username})
		w.WriteHeader(http.StatusNoContent)
	})
}

var (
	errSSOUserPassword = &apiError{Status: http.StatusForbidden, Code: "sso_user",
		Message: "This account signs in with single sign-on; it cannot have a password."}
	errPasswordLinkRequired = &apiError{Status: http.StatusForbidden, Code: "password_link_required",
		Message: "From a session, nobody sets another person's password: create a set-password link with " +
			"POST /api/users/{id}/password-link and give it to them; they choose their password with it."}
	errAdminsOwnPassword = &apiError{Status: http.StatusForbidden, Code: "admin_password_theirs",
		Message: "This admin has a password, and only they change it (with current_password). " +
			"To take their access away, delete the account."}
)

// refuseOthersPassword says whether caller may choose target's password. From a session, never:
// a stolen cookie would give its thief a password of their own choosing, and a lasting sign-in,
// for someone else; the person chooses it through a set-password link. An API key (which can
// already act for the person, by making them a key) still may, as automation and older clients
// do, except for an admin who has a password: that would take over their account.
func refuseOthersPassword(caller principal, target store.User) error {
	switch {
	case caller.SessionToken != "":
		return errPasswordLinkRequired
	case target.Role == store.RoleAdmin && target.HasPassword:
		return errAdminsOwnPassword
	}
	return nil
}
