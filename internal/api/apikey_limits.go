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
		"expire within %s; choose an earlier expires_at, or leave it out for the latest.", humanDuration(maxTTL)))
}

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
