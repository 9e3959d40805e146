package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The documented answers of the server, to match with errors.Is against an error of any
// call. Each is matched by an [*Error] with the status (and code) given; see [Client.Reconcile]
// for what an operator should do about each.
var (
	// ErrAlreadyClaimed is 403 bootstrap_already_completed: a claim of an install that is
	// already claimed. Deployed operators used to report BootstrapStateLost on it; Reconcile
	// now recovers from it by itself.
	ErrAlreadyClaimed = errors.New("the install is already claimed")
	// ErrUnauthorized is any 401: the operator token (for Claim and Reset) or the API key
	// (for Whoami) is missing, wrong, revoked or expired.
	ErrUnauthorized = errors.New("not authorized")
	// ErrOperatorTokenNotConfigured is 403 operator_token_not_configured: the server has no
	// --operator-token-file, so its claim cannot be reset over the API.
	ErrOperatorTokenNotConfigured = errors.New("the server has no operator token configured")
	// ErrRateLimited is 429: too many resets in the server's window (--bootstrap-reset-limit
	// per --bootstrap-reset-window, counted across replicas). Error.RetryAfter says when to
	// try again.
	ErrRateLimited = errors.New("rate limited")
	// ErrBootstrapPending is 503 bootstrap_pending: the install is not claimed yet, so the
	// server refuses sign-ins. None of this client's calls is a sign-in, so none should get
	// it; it is here for code that shares this error type with its own calls.
	ErrBootstrapPending = errors.New("the install is not claimed yet")
	// ErrUnavailable is any 5xx but bootstrap_pending (the server or its database is down
	// or failing), or the server could not be reached or did not answer within the timeout.
	// Error.RetryAfter is set when the server sent Retry-After.
	ErrUnavailable = errors.New("the server is unavailable")
)

// Error is an answer of the server with a status the call did not expect. Match it with
// errors.Is against the sentinels above, or with errors.As to read its fields. It never
// holds a secret: the server never puts one in an error body.
type Error struct {
	Op         string        // the request, such as "POST /api/bootstrap"
	Status     int           // the HTTP status
	Code       string        // the server's stable machine code, such as "bootstrap_already_completed"; "" when the body had none
	Message    string        // the server's sentence for a person, or the status text
	RetryAfter time.Duration // from Retry-After; 0 when absent
}

// Error returns the request, status, code and message, such as
// "terdut-server POST /api/bootstrap: 403 bootstrap_already_completed: This install has already been claimed. ...".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "terdut-server %s: %d", e.Op, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Is reports whether e is the documented answer that target stands for.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrAlreadyClaimed:
		return e.Status == http.StatusForbidden && e.Code == "bootstrap_already_completed"
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrOperatorTokenNotConfigured:
		return e.Status == http.StatusForbidden && e.Code == "operator_token_not_configured"
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	case ErrBootstrapPending:
		return e.Status == http.StatusServiceUnavailable && e.Code == "bootstrap_pending"
	case ErrUnavailable:
		return e.Status >= 500 && e.Status <= 599 && e.Code != "bootstrap_pending"
	}
	return false
}

// newError reads an error answer. The message is the server's JSON "error" when there is
// one; any other body (a proxy's page, say) is not repeated, only its status text.
func newError(op string, resp *http.Response, body []byte) *Error {
	e := &Error{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var eb struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(body, &eb) == nil && (eb.Error != "" || eb.Code != "") {
		e.Code, e.Message = eb.Code, eb.Error
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryAfter parses Retry-After, in seconds or as an HTTP date; 0 when absent or invalid.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d.Round(time.Second)
		}
	}
	return 0
}
