package api

import (
	"fmt"
	"net/http"
	"time"
)

var errInvalidExpiresAt = errBadRequest("invalid_expires_at",
	"expires_at is a time in the future in RFC 3339, such as 2030-01-31T12:00:00Z; leave it out for the longest a key may live.")

// parseExpiresAt reads a new key's expires_at: nil when absent or null, else a time to come.
func parseExpiresAt(v *string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, *v)
	if err != nil || !t.After(time.Now()) {
		return nil, errInvalidExpiresAt
	}
	return &t, nil
}

// errExpiryTooLate says how long the keys of single sign-on people may live.
func errExpiryTooLate(maxTTL time.Duration) *apiError {
	return errBadRequest("expires_at_too_late", fmt.Sprintf("The API keys of people who sign in through single sign-on "+
		"expire within %s of their last single sign-on; choose an earlier expires_at, or leave it out for the latest.",
		humanDuration(maxTTL)))
}

// errSSOSignInTooOld refuses a key for a single sign-on person who has not signed in for
// longer than their keys may live: it would be dead at once.
func errSSOSignInTooOld(maxTTL time.Duration) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: "sso_sign_in_required", Message: fmt.Sprintf(
		"This person last signed in through single sign-on more than %s ago, the longest their API keys live "+
			"after it; they sign in again first.", humanDuration(maxTTL))}
}

// errKeysOnlyFromClaim refuses a key for a machine user, asked for by anyone, the machine user
// itself included: the bootstrap principal's keys are the ones its claims issue, so that a
// reset and a claim leave it the claim's key and no other.
var errKeysOnlyFromClaim = &apiError{Status: http.StatusForbidden, Code: "keys_only_from_claim",
	Message: "A machine user's API keys are issued only by the bootstrap claim; its operator claims again for a new one."}

// errRecentSignIn asks a single sign-on session for a fresh authentication at the provider
// before it makes a key, a person or a set-password link, and names the step-up sign-in that
// asks the provider for one.
func errRecentSignIn(window time.Duration) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: "recent_sign_in_required", SignInURL: stepUpPath, Message: fmt.Sprintf(
		"To create an API key, a person or a set-password link from a single sign-on session, authenticate again "+
			"at the sign-in provider first (sign_in_url starts that sign-in): the authentication must be within the last %s.",
		humanDuration(window))}
}

var (
	errCurrentPasswordRequired = &apiError{Status: http.StatusForbidden, Code: "current_password_required",
		Message: "To create an API key, a person or a set-password link from a password session, send your own " +
			"current password as current_password."}
	errWrongCurrentPasswordForKey = &apiError{Status: http.StatusForbidden, Code: "wrong_current_password",
		Message: "The current_password sent is not your password."}
)

func errTooManyAPIKeys(perUser int) *apiError {
	return &apiError{Status: http.StatusConflict, Code: "too_many_api_keys", Message: fmt.Sprintf(
		"This user already holds %d live API keys, the most allowed; revoke one first.", perUser)}
}

// humanDuration writes whole days as days and anything else as Go does.
func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		if d == day {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
