package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// housekeepingTimeout bounds one round of housekeeping, so that a hung database cannot stall it.
const housekeepingTimeout = time.Minute

// startHousekeeping keeps the tables bounded and the cap on single sign-on people's keys in
// force: once now, then every cfg.SweepInterval. Every replica runs it; rounds that overlap
// share the work (see store.Sweep). The function it returns stops it and waits for a round in
// progress, before the store closes.
func startHousekeeping(ctx context.Context, st *store.Store, cfg Config, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(cfg.SweepInterval)
		defer tick.Stop()
		for {
			housekeep(ctx, st, cfg.SSOAPIKeyMaxTTL, cfg.LoginLimitWindow, log)
			sweepAudit(ctx, st, cfg.AuditRetention, log)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// housekeep runs one round: it logs what it removed or changed, and each failure as a
// warning (the next round tries again). The cap and the sweep are independent: one failing
// does not stop the other.
// loginWindow is --password-login-window: guessing counts untouched for longer are swept.
func housekeep(ctx context.Context, st *store.Store, ssoKeyTTL, loginWindow time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, housekeepingTimeout)
	defer cancel()
	capped, err := st.CapSSOAPIKeys(ctx, ssoKeyTTL)
	if err != nil && ctx.Err() == nil {
		log.Warn("housekeeping: capping the API keys of single sign-on people failed", "err", err)
	}
	if capped > 0 {
		log.Info("housekeeping: API keys of single sign-on people now expire within --sso-api-key-max-ttl",
			"api_keys", capped, "sso_api_key_max_ttl", ssoKeyTTL.String())
	}
	res, err := st.Sweep(ctx, loginWindow)
	if err != nil && ctx.Err() == nil {
		log.Warn("housekeeping: sweep failed", "err", err)
	}
	if res != (store.SweepResult{}) {
		log.Info("housekeeping: swept dead rows", "sessions", res.Sessions, "api_keys", res.APIKeys,
			"oidc_logins", res.OIDCLogins, "login_attempts", res.LoginAttempts, "password_links", res.PasswordLinks)
	}
}

// sweepAudit deletes the audit events older than --audit-retention (0: none), the only
// deletion audit_events allows.
func sweepAudit(ctx context.Context, st *store.Store, retention time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, housekeepingTimeout)
	defer cancel()
	n, err := st.SweepEvents(ctx, retention)
	if err != nil && ctx.Err() == nil {
		log.Warn("housekeeping: sweeping the audit past --audit-retention failed", "err", err)
	}
	if n > 0 {
		log.Info("housekeeping: deleted audit events older than --audit-retention", "audit_events", n,
			"audit_retention", retention.String())
	}
}
