package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// The bootstrap principal: the machine user a claim creates, an admin that can never sign in.
const (
	PrincipalUsername = "terdut-operator-bootstrap"
	PrincipalEmail    = "bootstrap@terdut-operator.local"
	// PrincipalKeyName names the API key each claim issues.
	PrincipalKeyName = "bootstrap"
)

// State is the claim state of the install.
type State string

// The two claim states.
const (
	StatePending  State = "pending"
	StateComplete State = "complete"
)

// Actor is who asked for a bootstrap transition, as the audit records it.
type Actor string

// The actors the audit knows.
const (
	ActorOperator  Actor = "operator"
	ActorCLI       Actor = "cli"
	ActorMigration Actor = "migration"
)

// BootstrapStatus is the claim row.
type BootstrapStatus struct {
	State       State
	Generation  int64
	PrincipalID *int64
	LastClaimAt *time.Time
	LastResetAt *time.Time
}

// AuthMethod is how an operator request proved that it came from the operator.
type AuthMethod string

// The methods the audit knows; the CLI and migrations have none ("").
const (
	AuthNone           AuthMethod = "none"            // no operator authentication configured: the open claim
	AuthOperatorToken  AuthMethod = "operator_token"  // a token of --operator-token-file
	AuthServiceAccount AuthMethod = "service_account" // a JWT of --operator-oidc-issuer
)

// AuditInfo says who is asking and from where, for the audit row.
type AuditInfo struct {
	Actor      Actor
	RemoteAddr string
	Method     AuthMethod // how the operator proved itself; "" for the CLI
	Subject    string     // the service account's subject, for AuthServiceAccount
	Pod        string     // the pod the token was bound to, when it was
	// RequestID and ClientRequestID name the HTTP request, as audit_events does for every
	// other action: the server's id and the client's X-Request-Id. Empty for the CLI.
	RequestID       string
	ClientRequestID string
}

// ClaimResult is what a claim hands back: the principal, its new key and the secret, shown once.
type ClaimResult struct {
	Principal  User
	Key        APIKey
	Secret     string
	Generation int64
}

// Bootstrap returns the claim row.
func (s *Store) Bootstrap(ctx context.Context) (BootstrapStatus, error) {
	var b BootstrapStatus
	err := s.pool.QueryRow(ctx, `SELECT state, generation, principal_id, last_claim_at, last_reset_at
		FROM bootstrap_state`).Scan(&b.State, &b.Generation, &b.PrincipalID, &b.LastClaimAt, &b.LastResetAt)
	return b, wrap(err, "read bootstrap state")
}

// lockBootstrap reads the claim row under FOR UPDATE: claims and resets serialize on it,
// and sign-ins (which take FOR SHARE in checkGate) wait for them. It marks the transaction
// as one that decided the gate (see gateChecked): a claim creates the principal while pending.
func lockBootstrap(ctx context.Context, tx pgx.Tx) (BootstrapStatus, error) {
	var b BootstrapStatus
	var marked bool
	err := tx.QueryRow(ctx, `SELECT state, generation, principal_id, `+gateChecked+` FROM bootstrap_state FOR UPDATE`).
		Scan(&b.State, &b.Generation, &b.PrincipalID, &marked)
	return b, wrap(err, "lock bootstrap state")
}

// Claim takes a pending install: it creates the bootstrap principal (or reuses the one from
// an earlier generation), revokes its older keys, issues a new key, marks the install
// complete with generation+1 and appends an audit row, all in one transaction.
// It returns ErrAlreadyClaimed when the install is already complete.
func (s *Store) Claim(ctx context.Context, who AuditInfo) (ClaimResult, error) {
	var res ClaimResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b, err := lockBootstrap(ctx, tx)
		if err != nil {
			return err
		}
		if b.State == StateComplete {
			return ErrAlreadyClaimed
		}
		res.Principal, err = ensurePrincipal(ctx, tx, b.PrincipalID)
		if err != nil {
			return err
		}
		if err := lockUser(ctx, tx, res.Principal.ID); err != nil {
			return err
		}
		if _, err := revokeUserKeys(ctx, tx, res.Principal.ID); err != nil {
			return err
		}
		if res.Key, res.Secret, err = insertAPIKey(ctx, tx, res.Principal.ID, PrincipalKeyName, nil); err != nil {
			return err
		}
		res.Generation = b.Generation + 1
		_, err = tx.Exec(ctx, `UPDATE bootstrap_state
			SET state = 'complete', generation = $1, principal_id = $2, last_claim_at = now()`,
			res.Generation, res.Principal.ID)
		if err != nil {
			return wrap(err, "mark claimed")
		}
		return appendAudit(ctx, tx, "claim", who, res.Generation, StateComplete, "")
	})
	if err != nil {
		return ClaimResult{}, err
	}
	return res, nil
}

// ensurePrincipal returns the bootstrap principal, creating it when this install has none.
func ensurePrincipal(ctx context.Context, tx pgx.Tx, id *int64) (User, error) {
	if id != nil {
		u, err := scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u WHERE u.id = $1`, *id))
		if !errors.Is(err, ErrNotFound) {
			return u, wrap(err, "find bootstrap principal")
		}
	}
	u, err := scanUser(tx.QueryRow(ctx, `
		INSERT INTO users AS u (username, email, role, kind) VALUES ($1, $2, 'admin', 'service')
		ON CONFLICT DO NOTHING
		RETURNING `+userColumns, PrincipalUsername, PrincipalEmail))
	if errors.Is(err, ErrNotFound) {
		// The name is taken by a user this install never recorded as its principal (created
		// before the claim state existed). Adopt it only if it is a machine user.
		u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
			WHERE lower(u.username) = lower($1) AND u.kind = 'service' AND u.password_hash IS NULL
			AND u.oidc_subject IS NULL`, PrincipalUsername))
		if errors.Is(err, ErrNotFound) {
			return User{}, fmt.Errorf("the username %q belongs to a person: %w", PrincipalUsername, ErrConflict)
		}
	}
	return u, wrap(err, "create bootstrap principal")
}

func appendAudit(ctx context.Context, tx pgx.Tx, action string, who AuditInfo, gen int64, st State, detail string) error {
	_, err := tx.Exec(ctx, `INSERT INTO bootstrap_audit (action, actor, remote_addr, generation, state, detail,
		auth_method, subject, pod) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		action, who.Actor, who.RemoteAddr, gen, st, detail, who.Method, clip(who.Subject, 512), clip(who.Pod, 512))
	if err != nil {
		return wrap(err, "write audit")
	}
	return appendClaimEvent(ctx, tx, action, who, gen, st, detail)
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// gateChecked is a boolean SQL expression, always true, that marks its transaction as one of
// this version's, which decide the gate themselves. While the install is pending, the
// database refuses new users and sessions from any other (migration 00010: replicas of a
// version before the gate, during a rolling upgrade, or a hand-written INSERT). Every
// statement that inserts into users or sessions, or an earlier one of its transaction,
// evaluates it before the insert; it costs no round trip of its own.
const gateChecked = `(set_config('terdut.gate', 'checked', true) = 'checked')`
