package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/store"
)

// Security events (OWASP ASVS v4 7.1.3, 7.2.1, 7.2.2): each is one log line, "security event",
// with a stable event name, the outcome, the actor, the client's address and the request's id,
// and what was acted on; never a secret, and caller input cut to logcap.MaxBytes. Administrative
// actions are also rows of audit_events (s.audit).

// The outcomes of a security event.
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"  // wrong credentials
	outcomeRefused   = "refused" // a rule said no: the gate, a limit, the groups
)

// event logs a security event of r by its actor (actorAttr): refusals and failures at WARN,
// the rest at INFO.
func (s *server) event(r *http.Request, name, outcome string, attrs ...slog.Attr) {
	s.eventBy(r, s.actorAttr(r), name, outcome, attrs...)
}

// eventBy logs a security event of r by the given actor.
func (s *server) eventBy(r *http.Request, actor slog.Attr, name, outcome string, attrs ...slog.Attr) {
	level := slog.LevelInfo
	if outcome != outcomeSucceeded {
		level = slog.LevelWarn
	}
	all := make([]slog.Attr, 0, 6+len(attrs))
	all = append(all, slog.String("event", name), slog.String("outcome", outcome), actor,
		slog.String("client_addr", s.clientName(r)))
	all = appendRequestIDs(all, r.Context())
	s.log.LogAttrs(r.Context(), level, "security event", append(all, attrs...)...)
}

// refusedEvent logs the refusal of r for reason, a security event that anyone can cause
// with nothing to show (a wrong operator token, a forged sign-on callback, a sign-in while
// pending): at most one line a second for each event and reason on a replica (s.refusalLogs),
// with suppressed, how many refusals it held back since its last line. Callers count every
// refusal in a metric.
func (s *server) refusedEvent(r *http.Request, name, reason string) {
	if ok, suppressed := s.refusalLogs.Allow("event " + name + " " + reason); ok {
		s.event(r, name, outcomeRefused, slog.String("reason", reason), slog.Int("suppressed", suppressed))
	}
}

// actorAttr is who made r: the user it authenticated, the operator and how it proved itself,
// or anonymous.
func (s *server) actorAttr(r *http.Request) slog.Attr {
	if u := principalFrom(r.Context()).User; u.ID != 0 {
		return userActor(u)
	}
	if op := operatorFrom(r.Context()); op.Method != "" {
		return slog.Any("actor", operatorActor{op})
	}
	return slog.Group("actor", slog.String("kind", "anonymous"))
}

// userActor is a user as an event's actor; a sign-in's actor is the person signing in.
func userActor(u store.User) slog.Attr {
	return slog.Group("actor", slog.String("kind", "user"), slog.Int64("id", u.ID),
		slog.String("user_kind", string(u.Kind)), slog.String("role", string(u.Role)))
}

// operatorActor logs the operator as an actor: its kind, then the proof's method and identity.
type operatorActor struct{ p operatorProof }

func (a operatorActor) LogValue() slog.Value {
	return slog.GroupValue(append([]slog.Attr{slog.String("kind", "operator")}, a.p.LogValue().Group()...)...)
}

// target names the user an event acted on.
func target(u store.User) slog.Attr { return targetAttr(u.ID, u.Username) }

// targetAttr names the user an event acted on by id and username.
func targetAttr(id int64, username string) slog.Attr {
	return slog.Group("target", slog.Int64("id", id), slog.String("username", logcap.String(username)))
}

// audit records an administrative action of r that has been done: its security event, and its
// row in audit_events, with r's actor. The row is written after the action, even if the client
// has gone meanwhile; if it cannot be written, the log line (at ERROR) is the record.
func (s *server) audit(r *http.Request, e store.Event, attrs ...slog.Attr) {
	c := requestFrom(r.Context())
	e.RemoteAddr, e.RequestID, e.ClientRequestID = s.clientName(r), c.id[0], c.clientID
	if e.ActorKind == "" {
		if u := principalFrom(r.Context()).User; u.ID != 0 {
			e.ActorKind, e.ActorID, e.ActorName = store.ActorKindUser, u.ID, u.Username
		}
	}
	attrs = append(attrs, targetAttr(e.TargetID, e.TargetName))
	if e.Detail != "" {
		attrs = append(attrs, slog.String("detail", logcap.String(e.Detail)))
	}
	actor := s.actorAttr(r)
	if e.ActorKind == store.ActorKindProvider {
		actor = slog.Group("actor", slog.String("kind", "provider"), slog.String("issuer", logcap.String(e.ActorName)))
	}
	s.eventBy(r, actor, e.Event, outcomeSucceeded, attrs...)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.store.AppendEvent(ctx, e); err != nil {
		s.log.ErrorContext(r.Context(), "audit event not written to audit_events: this log line is its only record",
			"event", e.Event, "request_id", e.RequestID, "err", err)
	}
}

// ssoEvents records a single sign-on: the sign-in, and what the provider's word changed, a
// person provisioned or a role.
func (s *server) ssoEvents(r *http.Request, issuer string, si store.SSOSignIn) {
	u := si.User
	provider := store.Event{ActorKind: store.ActorKindProvider, ActorName: issuer, TargetID: u.ID, TargetName: u.Username}
	switch {
	case si.Created:
		e := provider
		e.Event, e.Detail = "user.created", "provisioned by single sign-on as "+string(u.Role)
		s.audit(r, e, slog.String("role", string(u.Role)))
	case si.PreviousRole != u.Role:
		e := provider
		e.Event, e.Detail = "user.role_changed", string(si.PreviousRole)+" to "+string(u.Role)+" by the provider's groups"
		s.audit(r, e, slog.String("previous_role", string(si.PreviousRole)), slog.String("role", string(u.Role)))
	}
	s.eventBy(r, userActor(u), "login.sso.succeeded", outcomeSucceeded, target(u), slog.Bool("created", si.Created))
}
