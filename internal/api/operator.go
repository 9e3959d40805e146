package api

import (
	"context"
	"errors"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/store"
)

var errOperatorTokenNotConfigured = &apiError{Status: http.StatusForbidden, Code: "operator_token_not_configured",
	Message: "This server has no operator authentication configured (--operator-token-file or --operator-oidc-issuer), so the claim cannot be reset over the API; use `terdut-server bootstrap reset` on the server instead."}

var errBadOperatorToken = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
	Message: "This endpoint needs the operator token or the operator's service-account token as a Bearer token. API keys and sessions are not accepted here."}

// errOperatorIdentityUnavailable is logged by requireOperator, at a bounded rate, not by writeError.
var errOperatorIdentityUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
	Message: "The operator's service-account token cannot be checked right now (its issuer's keys, or the API server asked to review it, cannot be reached); try again shortly.", RetryAfter: 5 * time.Second,
	logged: true}

// refusalLogPeriod is how often each kind of refusal on the operator endpoints, which anyone
// can cause once a request, may write a line on one replica; the metrics count every one.
const refusalLogPeriod = time.Second

var errOperatorMediaType = &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
	Message: "Send no body, or an application/json one."}

var errOperatorCrossOrigin = &apiError{Status: http.StatusForbidden, Code: "cross_origin",
	Message: "Cross-site requests may not claim or reset this install."}

var errOperatorHost = &apiError{Status: http.StatusForbidden, Code: "host_not_allowed",
	Message: "With no operator authentication configured, the claim is accepted only at the host of --public-url or on a loopback address."}

var errOperatorClientNotLocal = &apiError{Status: http.StatusForbidden, Code: "client_not_local",
	Message: "With no operator authentication configured, the claim is accepted only from this machine (a loopback address); configure --operator-token-file, or run terdut-server bootstrap claim."}

// operatorProof is how a request to an operator endpoint proved that it came from the
// operator. Its LogValue shows the method and the identity, never a token.
type operatorProof struct {
	Method  store.AuthMethod
	Subject string
	Pod     string
}

type operatorKey struct{}

func operatorFrom(ctx context.Context) operatorProof {
	p, _ := ctx.Value(operatorKey{}).(operatorProof)
	return p
}

// audit is who made r, for the claim's and reset's audit rows: the operator, the client's
// address (through --trusted-proxies) and the request's ids, as every audit row has them.
func (s *server) operatorAudit(r *http.Request, p operatorProof) store.AuditInfo {
	c := requestFrom(r.Context())
	return store.AuditInfo{Actor: store.ActorOperator, RemoteAddr: s.clientName(r), Method: p.Method,
		Subject: p.Subject, Pod: p.Pod, RequestID: c.id[0], ClientRequestID: c.clientID}
}

// LogValue logs the method and, for a service-account token, the identity.
func (p operatorProof) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("method", string(p.Method))}
	if p.Subject != "" {
		attrs = append(attrs, slog.String("subject", p.Subject))
	}
	if p.Pod != "" {
		attrs = append(attrs, slog.String("pod", logcap.String(p.Pod)))
	}
	return slog.GroupValue(attrs...)
}

// requireOperator admits only the operator: a token of --operator-token-file or a
// service-account token that the --operator-oidc-* issuer signed for an allowed subject.
// When open is true and neither is configured, a client on this machine is admitted (the
// claim on an install without an operator): its address, and the peer's, must be loopback
// (the Host header, which any client writes as it likes, proves nothing of where it is), and
// the Host must be the public URL's host or a loopback name, against DNS rebinding.
// Whatever is configured, a body must be JSON (or absent) and browsers' cross-site requests
// are refused, so that no web page can make a visitor's browser claim or reset the install.
func (s *server) requireOperator(open bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !jsonOrNoBody(r) {
			s.writeError(w, r, errOperatorMediaType)
			return
		}
		if err := s.crossOrigin.Check(r); err != nil {
			s.writeError(w, r, errOperatorCrossOrigin)
			return
		}
		tokens, identity := s.opts.OperatorTokens, s.opts.OperatorIdentity
		if !tokens.Configured() && identity == nil {
			switch {
			case !open:
				s.writeError(w, r, errOperatorTokenNotConfigured)
			case !s.localOrPublicHost(r):
				s.writeError(w, r, errOperatorHost)
			case !s.localClient(r):
				s.writeError(w, r, errOperatorClientNotLocal)
			default:
				next.ServeHTTP(w, withOperator(r, operatorProof{Method: store.AuthNone}))
			}
			return
		}
		token, _ := bearerToken(r)
		reason := "missing_token"
		if token != "" {
			reason = "wrong_token"
		}
		if token != "" && tokens.Check(token) {
			next.ServeHTTP(w, withOperator(r, operatorProof{Method: store.AuthOperatorToken}))
			return
		}
		if token != "" && identity != nil && opjwt.LooksLikeJWT(token) {
			id, err := identity.Verify(r.Context(), token)
			var refused *opjwt.RefusedError
			switch {
			case err == nil:
				next.ServeHTTP(w, withOperator(r, operatorProof{Method: store.AuthServiceAccount, Subject: id.Subject, Pod: id.Pod}))
				return
			case errors.As(err, &refused):
				s.metrics.operatorIdentityRefusals.WithLabelValues(refused.Reason).Inc()
				reason = "service_account_" + refused.Reason
				if ok, suppressed := s.refusalLogs.Allow(refused.Reason); ok {
					s.log.WarnContext(r.Context(), "operator service-account token refused", "reason", refused.Reason,
						"detail", logcap.Cut(refused.Detail, 4*logcap.MaxBytes), "remote_addr", remoteHost(r),
						"suppressed", suppressed)
				}
			default:
				// A key not yet read is not the issuer's outage, but neither is it a wrong
				// token: the 503 tells the operator, whose key may be new, to retry shortly,
				// where a 401 would make it back off long.
				label, level, msg := "issuer_unavailable", slog.LevelError, "operator service-account token not verified"
				if errors.Is(err, opjwt.ErrKeyNotYetRead) {
					label, level, msg = "key_not_yet_read", slog.LevelWarn, "operator service-account token names a key not yet read: answered 503"
				}
				s.metrics.operatorIdentityRefusals.WithLabelValues(label).Inc()
				if ok, suppressed := s.refusalLogs.Allow(label); ok {
					s.log.Log(r.Context(), level, msg, "err", err, "remote_addr", remoteHost(r), "suppressed", suppressed)
				}
				s.writeError(w, r, errOperatorIdentityUnavailable)
				return
			}
		}
		s.metrics.operatorAuthFailures.Inc()
		// Anyone can send a wrong token: like the refusals above, its security event is
		// written at most once a second for each reason on a replica, saying how many it
		// stands for, while the metric counts every one.
		s.refusedEvent(r, "operator.refused", reason)
		s.writeError(w, r, errBadOperatorToken)
	})
}

func withOperator(r *http.Request, p operatorProof) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), operatorKey{}, p))
}

// jsonOrNoBody reports whether the request has no body, or a JSON one: a form or text/plain
// body is what a cross-site HTML form or a "simple" fetch sends.
func jsonOrNoBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return r.ContentLength == 0
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// localClient reports whether r comes from this machine: its peer has a loopback address,
// and, when --trusted-proxies names the peer, every one of forwardingHeaders that r has names
// a client (forwardedClient) with a loopback address: a proxy on this machine forwarding for
// someone elsewhere, or naming its client in a way that cannot be read, is not local, and a
// header the proxy passes on untouched from its client cannot outvote the one it writes. A
// request that says it was forwarded, from a peer --trusted-proxies does not name, is not
// local either: such a peer is a proxy nobody vouched for (a mesh sidecar, a host's nginx),
// and a client that connects directly sends none of those headers. (A proxy that sends none,
// as kubectl port-forward does, cannot be told from a local client: docs/security.md.)
func (s *server) localClient(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !peer.Addr().Unmap().IsLoopback() {
		return false
	}
	trusted := s.trustedProxy(peer.Addr().Unmap())
	for _, name := range forwardingHeaders {
		if !sentHeader(r.Header, name) {
			continue
		}
		if client, ok := forwardedClient(r.Header, name, s.trustedProxy); !trusted || !ok || !client.IsLoopback() {
			return false
		}
	}
	return true
}

// localOrPublicHost reports whether the request's Host is the public URL's host or a
// loopback address, so that a DNS-rebinding page (its own name resolving to this server)
// cannot take an open claim.
func (s *server) localOrPublicHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return s.opts.PublicURL != nil && strings.EqualFold(host, s.opts.PublicURL.Hostname())
}
