package sso

import (
	"errors"
	"time"
)

// Kind says whose failure an Error is; the HTTP layer maps each to its status.
type Kind int

const (
	// Invalid: the callback is malformed (400).
	Invalid Kind = iota + 1
	// Unauthenticated: the provider did not sign the person in, or its answer fails a check (401).
	Unauthenticated
	// Forbidden: the provider vouched for the person, but the group rules refuse them (403).
	Forbidden
	// Misconfigured: an administrator must fix the configuration or the provider's (500).
	Misconfigured
	// ProviderFailed: the provider failed to answer a request it should have (502).
	ProviderFailed
	// Unavailable: the provider cannot be reached right now; RetryAfter says when to retry (503).
	Unavailable
)

// Error is why a sign-in is refused or cannot happen, for the person: a stable Code and a
// sentence. Every error this package returns to a refused sign-in is, or wraps, one.
type Error struct {
	Kind       Kind
	Code       string
	Message    string
	RetryAfter time.Duration
	// Logged: this package logs the error itself, where it arises, at a bounded rate; whoever
	// answers it must not log it again.
	Logged bool
}

func (e *Error) Error() string { return e.Message }

// codeOf returns the Code of the Error err is or wraps; "internal" for any other error.
func codeOf(err error) string {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Code
	}
	return "internal"
}
