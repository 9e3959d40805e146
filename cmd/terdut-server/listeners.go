package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/internal/certfile"
	"github.com/terdut-server/terdut-server/internal/logcap"
)

// port is one listener of the server and what it serves.
type port struct {
	setting string // the flag that names its address, for errors
	msg     string // its "listening" log line
	srv     *http.Server
	ln      net.Listener
}

// listen opens a port for h at addr; with pair (not nil) it serves https with the pair's
// certificate as it is at each handshake. errorLog is net/http's (newErrorLog).
func listen(setting, addr, msg string, h http.Handler, pair *certfile.Pair, errorLog *log.Logger) (*port, error) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: errorLog}
	if pair != nil {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", setting, addr, err)
	}
	return &port{setting: setting, msg: msg, srv: srv, ln: ln}, nil
}

// errorLogKinds are the kinds of lines of net/http's error log, by how each begins. Any
// client can cause most of them once a connection with nothing to show (a TLS handshake that
// fails, an HTTP/2 connection that does not start with the preface, that sends GOAWAY with an
// error or a frame the protocol forbids), and net/http and its HTTP/2 server may write lines
// no one has seen yet: so every line is of one kind, the last kind ("other") taking whatever
// the others do not.
var errorLogKinds = []struct{ prefix, reason, msg string }{
	{"http: TLS handshake error from ", "tls_handshake",
		"TLS handshakes failed (logged at most once a second)"},
	{"http2: server: error reading preface from client ", "http2_preface",
		"HTTP/2 connections did not start with the preface (logged at most once a second)"},
	{"http2: received GOAWAY ", "http2_goaway",
		"HTTP/2 clients went away with an error (logged at most once a second)"},
	{"http2: server connection error from ", "http2_connection_error",
		"HTTP/2 connections broke the protocol (logged at most once a second)"},
	{"http2: ", "http2_other",
		"the HTTP/2 server reported a connection's failure (logged at most once a second)"},
	{"", "other",
		"net/http reported a failure (logged at most once a second)"},
}

// errorLog is net/http's error log: each of its lines goes to the server's log at WARN, at
// most one a second for each kind (errorLogKinds), saying how many it stands for and, cut to a
// bounded length, the last line as net/http wrote it. So however many connections a client
// opens, and whatever they make net/http say, the log grows by a few lines a second at most
// (the other refusals that anyone can cause are bounded alike).
type errorLog struct {
	log    *slog.Logger
	limits *logcap.PerKey
}

// newErrorLog returns an error log for every listener of one server, so that the bound is
// the server's.
func newErrorLog(l *slog.Logger) *log.Logger {
	return log.New(&errorLog{log: l, limits: logcap.NewPerKey(time.Second)}, "", 0)
}

func (e *errorLog) Write(p []byte) (int, error) {
	line := strings.TrimSuffix(string(p), "\n")
	for _, k := range errorLogKinds {
		if !strings.HasPrefix(line, k.prefix) {
			continue
		}
		if ok, suppressed := e.limits.Allow(k.reason); ok {
			e.log.Warn(k.msg, "reason", k.reason, "suppressed", suppressed, "last", logcap.Cut(line, 4*logcap.MaxBytes))
		}
		break
	}
	return len(p), nil
}

// url is where a client on this host reaches the port: localhost when it listens on every
// address, else the address it listens on.
func (p *port) url() string {
	scheme := "http"
	if p.srv.TLSConfig != nil {
		scheme = "https"
	}
	host, portNum, _ := net.SplitHostPort(p.ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, portNum)
}

func (p *port) serve() error {
	if p.srv.TLSConfig != nil {
		return p.srv.ServeTLS(p.ln, "", "")
	}
	return p.srv.Serve(p.ln)
}

// serveAll serves every port until ctx is cancelled, then drains them all at once within
// timeout. A port that fails ends them all.
func serveAll(ctx context.Context, ports []*port, timeout time.Duration, log *slog.Logger) error {
	errc := make(chan error, len(ports))
	for _, p := range ports {
		go func() {
			err := p.serve()
			if !errors.Is(err, http.ErrServerClosed) {
				err = fmt.Errorf("%s %s: %w", p.setting, p.ln.Addr(), err)
			}
			errc <- err
		}()
	}
	var failed error
	select {
	case failed = <-errc:
		log.Error("a listener failed: stopping", "err", failed)
	case <-ctx.Done():
		log.Info("shutting down: draining requests in flight", "timeout", timeout.String())
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	shut := make(chan error, len(ports))
	for _, p := range ports {
		go func() { shut <- p.srv.Shutdown(sctx) }()
	}
	var errs []error
	for range ports {
		if err := <-shut; err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	running := len(ports)
	if failed != nil {
		errs, running = append(errs, failed), running-1
	}
	for range running {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// closeAll closes the listeners of ports that never served.
func closeAll(ports []*port) {
	for _, p := range ports {
		p.ln.Close()
	}
}
