package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// State is the claim state of an install.
type State string

// The two claim states.
const (
	// StatePending: nobody has claimed the install, or its claim was reset. With the gate on
	// (the default), nobody can sign in until it is claimed.
	StatePending State = "pending"
	// StateComplete: the install is claimed.
	StateComplete State = "complete"
)

// Status is the claim state and its generation: how many times the install has been claimed.
type Status struct {
	State      State
	Generation int64
}

// User is a user of terdut-server as the API shows it.
type User struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	Email     string    `json:"email"`
	Role      string    `json:"role"` // "admin" or "member"
	Kind      string    `json:"kind"` // "human" or "service" (the bootstrap principal)
	CreatedAt time.Time `json:"created_at"`
}

// APIKey is an API key as the API shows it (a claim's, or any user's). Key is the secret, set
// only in the answer that created the key, shown this once: the server keeps only its hash.
// LastUsedAt is nil until the key is first used. APIKey's String, GoString, LogValue and MarshalJSON leave the secret
// out, so that printing, logging or encoding a key (or a value holding one, such as a
// ReconcileResult passed to a structured logger) does not leak it; read Key itself to store it.
type APIKey struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"user_id"`
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// String describes the key without its secret.
func (k APIKey) String() string {
	return fmt.Sprintf("{ID:%d UserID:%d Name:%s Key:[redacted] CreatedAt:%s}", k.ID, k.UserID, k.Name,
		k.CreatedAt.Format(time.RFC3339))
}

// GoString is String, so that %#v does not print the secret either.
func (k APIKey) GoString() string { return "client.APIKey" + k.String() }

// MarshalJSON encodes the key with "[redacted]" in place of its secret.
func (k APIKey) MarshalJSON() ([]byte, error) {
	type plain APIKey
	p := plain(k)
	if p.Key != "" {
		p.Key = "[redacted]"
	}
	return json.Marshal(p)
}

// LogValue logs the key without its secret.
func (k APIKey) LogValue() slog.Value {
	return slog.GroupValue(slog.Int64("id", k.ID), slog.Int64("user_id", k.UserID), slog.String("name", k.Name))
}

// Claim is what a successful claim returns: the bootstrap principal (the machine user
// "terdut-operator-bootstrap", an admin), its new API key, and the new generation.
type Claim struct {
	User       User   `json:"user"`
	APIKey     APIKey `json:"api_key"`
	Generation int64  `json:"generation"`
}

// ResetResult is what a reset did: the install is pending again, and RevokedAPIKeys of the
// bootstrap principal's keys stopped working. No other user's data is touched.
type ResetResult struct {
	State          State `json:"state"`
	Generation     int64 `json:"generation"`
	RevokedAPIKeys int64 `json:"revoked_api_keys"`
}

// Status returns the claim state (GET /api/bootstrap/status, no credentials). Errors: ones
// matching [ErrUnavailable], or the context's.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var body struct {
		State      State `json:"state"`
		Generation int64 `json:"generation"`
	}
	if err := c.call(ctx, c.operator, http.MethodGet, "/api/bootstrap/status", "", http.StatusOK, &body); err != nil {
		return Status{}, err
	}
	return Status(body), nil
}

// Claim claims a pending install with the operator token (POST /api/bootstrap) and returns
// the bootstrap principal's new API key; store it at once, it is shown only here. It revokes
// the principal's older keys. Errors: [ErrAlreadyClaimed] when the install is claimed,
// [ErrUnauthorized] when the token is missing or wrong, [ErrUnavailable], the context's.
// When a Claim fails in transit the key may be lost; Reconcile recovers from that.
func (c *Client) Claim(ctx context.Context) (Claim, error) {
	var cl Claim
	token, err := c.operatorToken("POST /api/bootstrap")
	if err != nil {
		return Claim{}, err
	}
	if err := c.call(ctx, c.operator, http.MethodPost, "/api/bootstrap", token, http.StatusCreated, &cl); err != nil {
		return Claim{}, err
	}
	if cl.APIKey.Key == "" {
		return Claim{}, errors.New("terdut-server POST /api/bootstrap: the response holds no API key")
	}
	return cl, nil
}

// Reset reopens the claim with the operator token (POST /api/bootstrap/reset): the install is
// pending again, the bootstrap principal's keys and sessions are revoked, and nobody can sign
// in (with the gate on) until the next claim; no other user's data is touched. Resetting a
// pending install succeeds and revokes nothing. Errors: [ErrUnauthorized],
// [ErrOperatorTokenNotConfigured], [ErrRateLimited] (see Error.RetryAfter), [ErrUnavailable],
// the context's.
func (c *Client) Reset(ctx context.Context) (ResetResult, error) {
	var rr ResetResult
	token, err := c.operatorToken("POST /api/bootstrap/reset")
	if err != nil {
		return rr, err
	}
	err = c.call(ctx, c.operator, http.MethodPost, "/api/bootstrap/reset", token, http.StatusOK, &rr)
	return rr, err
}

// Whoami returns the user that apiKey belongs to (GET /api/me). Errors: [ErrUnauthorized]
// when the key is not a live key, [ErrUnavailable], the context's.
func (c *Client) Whoami(ctx context.Context, apiKey string) (User, error) {
	if !headerSafe(apiKey) {
		// It cannot be a key, and it cannot be sent: answer as the server would.
		return User{}, &Error{Op: "GET /api/me", Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "The API key holds characters no API key has."}
	}
	var body struct {
		User User `json:"user"`
	}
	if err := c.call(ctx, c.base, http.MethodGet, "/api/me", apiKey, http.StatusOK, &body); err != nil {
		return User{}, err
	}
	return body.User, nil
}

// PrincipalUsername is the bootstrap principal's username: the machine user every claim's
// key belongs to.
const PrincipalUsername = "terdut-operator-bootstrap"

// CheckKey reports whether apiKey is a working key of the bootstrap principal: true when the
// server accepts it and it belongs to the principal, false when the server itself answers
// 401 unauthorized (a wrong, revoked or empty key) or the key is some other user's (it
// proves nothing about the claim). Any other failure is an error and says nothing about the
// key, and so is a 401 that is not the server's own (from a proxy in front of it, say):
// never act on those as if the key were dead.
func (c *Client) CheckKey(ctx context.Context, apiKey string) (bool, error) {
	u, err := c.Whoami(ctx, apiKey)
	var e *Error
	switch {
	case err == nil:
		return u.Username == PrincipalUsername && u.Kind == "service", nil
	case errors.As(err, &e) && e.Status == http.StatusUnauthorized && e.Code == "unauthorized":
		return false, nil
	}
	return false, err
}
