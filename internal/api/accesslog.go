package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// accessLog writes the request's access line: method, route pattern (never the raw path, which
// can hold anything a client typed), status, duration, the principal's id (0: none) and the
// request's ids (the server's, and the client's X-Request-Id beside it when sent). It costs what slog costs: the attributes are plain values, passed as they are.
// The method is the client's word (Go's server takes any token that fits in its 64 KiB of headers), so
// it is cut like every caller value in a line.
func accessLog(log *slog.Logger, method, route string, c *requestContext, took time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	log.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("method", logcap.String(method)), slog.String("route", route), slog.Int("status", c.w.status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000), slog.Int64("user_id", c.p.User.ID),
		slog.String("request_id", c.id[0]), slog.String("client_request_id", c.clientID))
}

// maxRequestIDBytes bounds an X-Request-Id taken from a client.
const maxRequestIDBytes = 64

// requestIDGen names requests: this replica's random prefix and a counter. A client's
// X-Request-Id never takes its place (clientRequestID keeps it beside).
type requestIDGen struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDGen {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &requestIDGen{prefix: hex.EncodeToString(b) + "-"}
}

func (ids *requestIDGen) next() string {
	var buf [32]byte
	b := append(buf[:0], ids.prefix...)
	return string(strconv.AppendUint(b, ids.n.Add(1), 36))
}

// clientRequestID is the client's X-Request-Id when it sent one plain token of at most
// maxRequestIDBytes, else "".
func clientRequestID(r *http.Request) string {
	if v := r.Header["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return v[0]
	}
	return ""
}

// validRequestID admits 1 to maxRequestIDBytes letters, digits and . _ : - + / =, what
// request ids made by proxies and clients (UUIDs, base64) are written in.
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return true
}
