package client

import (
	"context"
	"errors"
	"fmt"
)

// Action is what [Client.Reconcile] did.
type Action string

// The actions of Reconcile.
const (
	// ActionNone: the install is claimed and the held key works. Nothing changed.
	ActionNone Action = "none"
	// ActionClaimed: the install was pending (a new install, or one reset earlier) and is now
	// claimed with a new key.
	ActionClaimed Action = "claimed"
	// ActionResetAndClaimed: the install was claimed but the held key did not work (the
	// operator held none, or the claim was taken by someone else, or the key was lost or
	// revoked), so the claim was reset and taken again with a new key. The bootstrap
	// principal's older keys and sessions were revoked; no person's data was touched.
	ActionResetAndClaimed Action = "reset_and_claimed"
)

// ReconcileResult is what Reconcile did and the state it left.
type ReconcileResult struct {
	Action Action
	// Generation is the claim's generation after the step: the operator may record it in
	// the TerdutServer's status (it counts claims, so it grows on every recovery).
	Generation int64
	// APIKey is the new key when Action is claimed or reset_and_claimed (zero otherwise).
	// Store APIKey.Key in the Secret before anything else: it is shown only this once, and
	// the key held before no longer works.
	APIKey APIKey
	// User is the bootstrap principal when a claim was made (zero otherwise).
	User User
	// RevokedAPIKeys is how many keys the reset revoked (reset_and_claimed only).
	RevokedAPIKeys int64
}

// reconcileRounds bounds how often Reconcile starts over after losing a race for the claim.
const reconcileRounds = 2

// Reconcile is the whole recommended bootstrap step of the operator, safe to run on every
// reconcile: it reads the claim state, then
//
//   - pending: claims the install ([ActionClaimed]);
//   - complete, and heldKey is set and still works: does nothing ([ActionNone]);
//   - complete, and heldKey is empty or the server itself rejects it (401 unauthorized): resets
//     the claim and claims it again ([ActionResetAndClaimed]).
//
// heldKey is the API key the operator keeps in its Secret, or "" when it has none. On any
// Action but none, store ReconcileResult.APIKey.Key at once. If another claimant takes the
// claim between the state read and the claim, Reconcile starts over once.
//
// How results map onto the operator's conditions:
//
//   - ActionNone, ActionClaimed, ActionResetAndClaimed: bootstrapped. A lost claim is
//     recovered here, so BootstrapStateLost is no longer a terminal condition: clear it, and
//     record an event on reset_and_claimed (the claim was lost and has been recovered).
//   - [ErrRateLimited]: the server refused the reset because it was reset too often lately
//     (two operators fighting over one install?). Requeue after the error's RetryAfter;
//     nothing changed, the install is still claimed.
//   - [ErrUnavailable] (5xx, unreachable, or the per-call timeout) and [ErrBootstrapPending]:
//     transient; requeue with backoff, after RetryAfter when it is set. If the reset went
//     through and the claim did not, the install is pending and nobody can sign in until the
//     next Reconcile claims it, so requeue promptly (within seconds).
//   - [ErrUnauthorized]: the server rejects the operator token: the Secret the operator
//     reads and the file mounted into the server disagree (the server re-reads its file when
//     it changes, so this can be a rotation in flight). Or, rarely, something in front of the
//     server answered 401 to the key check. Set a condition such as OperatorTokenRejected
//     (the error's message says which request failed) and requeue with a long backoff.
//   - [ErrOperatorTokenNotConfigured]: the server runs without --operator-token-file, so a
//     lost claim cannot be recovered over the API. Set a condition; an administrator can
//     run `terdut-server bootstrap reset` in the pod, or the operator can mount the token.
//   - [ErrAlreadyClaimed]: only when the claim was lost twice in a row to another claimant;
//     requeue. Run a single reconciler per install (leader election): two operators holding
//     different keys would keep taking the claim from each other until [ErrRateLimited].
//   - the context's error: the caller's context ended.
//
// Reconcile never resets on an ambiguous answer: when checking heldKey fails in any other
// way (a 5xx, a timeout, a 401 from a proxy rather than the server), it returns that error
// and changes nothing.
func (c *Client) Reconcile(ctx context.Context, heldKey string) (ReconcileResult, error) {
	var err error
	for range reconcileRounds {
		var res ReconcileResult
		res, err = c.reconcileOnce(ctx, heldKey)
		if !errors.Is(err, ErrAlreadyClaimed) {
			return res, err
		}
	}
	return ReconcileResult{}, err
}

func (c *Client) reconcileOnce(ctx context.Context, heldKey string) (ReconcileResult, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return ReconcileResult{}, fmt.Errorf("reconcile: read the claim state: %w", err)
	}
	switch st.State {
	case StatePending:
		return c.claim(ctx, ActionClaimed, 0)
	case StateComplete:
		if heldKey != "" {
			ok, err := c.CheckKey(ctx, heldKey)
			if err != nil {
				return ReconcileResult{}, fmt.Errorf("reconcile: check the held API key: %w", err)
			}
			if ok {
				return ReconcileResult{Action: ActionNone, Generation: st.Generation}, nil
			}
		}
		rr, err := c.Reset(ctx)
		if err != nil {
			return ReconcileResult{}, fmt.Errorf("reconcile: reset the lost claim: %w", err)
		}
		return c.claim(ctx, ActionResetAndClaimed, rr.RevokedAPIKeys)
	}
	return ReconcileResult{}, fmt.Errorf("reconcile: the server reports an unknown claim state %q", st.State)
}

func (c *Client) claim(ctx context.Context, action Action, revoked int64) (ReconcileResult, error) {
	cl, err := c.Claim(ctx)
	if err != nil {
		if action == ActionResetAndClaimed {
			return ReconcileResult{}, fmt.Errorf("reconcile: claim after the reset (the install is pending until claimed): %w", err)
		}
		return ReconcileResult{}, fmt.Errorf("reconcile: claim: %w", err)
	}
	return ReconcileResult{Action: action, Generation: cl.Generation, APIKey: cl.APIKey, User: cl.User,
		RevokedAPIKeys: revoked}, nil
}
