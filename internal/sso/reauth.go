package sso

import (
	"math"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// authTimeSkew is how far the provider's clock may run ahead of ours: an auth_time further in
// the future is refused on a step-up, and ignored on an ordinary sign-in.
const authTimeSkew = time.Minute

var (
	errAuthTimeMissing = &Error{Kind: Unauthenticated, Code: "sso_auth_time_missing",
		Message: "The sign-in provider did not say when you authenticated (no auth_time in its ID token), so this " +
			"sign-in cannot prove a fresh authentication; an administrator can tell you how to create API keys here."}
	errReauthNotFresh = &Error{Kind: Unauthenticated, Code: "sso_reauth_not_fresh",
		Message: "The sign-in provider signed you in without asking you to authenticate again; " +
			"sign out at the provider, or ask an administrator, and start again."}
)

// authenticatedAt reads when the provider says the person authenticated: the ID token's
// auth_time claim, at most now. On an ordinary sign-in an auth_time missing, malformed or
// further ahead than authTimeSkew is nil, unknown: the sign-in succeeds, but its session makes
// no API key. On a step-up, which asked for max_age=0, OpenID Connect Core requires the claim
// and requires a new authentication: errAuthTimeMissing without one, errTokenRejected for one
// from the future, errReauthNotFresh for one from before the sign-in began.
func authenticatedAt(claim any, login store.OIDCLogin, now time.Time) (*time.Time, error) {
	secs, ok := claim.(float64) // a JSON number, as encoding/json decodes one into any
	if !ok || secs <= 0 || math.IsInf(secs, 0) || secs > float64(math.MaxInt32)*4 {
		if login.StepUp {
			return nil, errAuthTimeMissing
		}
		return nil, nil
	}
	at := time.Unix(int64(secs), 0)
	switch {
	case at.After(now.Add(authTimeSkew)):
		if login.StepUp {
			return nil, errTokenRejected
		}
		return nil, nil
	case at.After(now):
		at = now
	}
	// auth_time has whole seconds: one from the second the sign-in began is fresh.
	if login.StepUp && at.Before(login.StartedAt.Add(-authTimeSkew).Truncate(time.Second)) {
		return nil, errReauthNotFresh
	}
	return &at, nil
}
