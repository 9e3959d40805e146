package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestServe_HTTP2ErrorLines: an anonymous HTTP/2 client over TLS can make net/http write a
// line of its error log once a connection, whatever the line says (here a GOAWAY with an
// error code, and a frame the protocol forbids). Every line of that log is bounded: at most
// one a second for each of a few kinds on a server, saying how many it stands for, so that
// many such connections cost a few lines, not one each, and every failure is accounted for.
func TestServe_HTTP2ErrorLines(t *testing.T) {
	srv, u, ca := startTLSServe(t)
	// h2 opens an HTTP/2 connection as a client does (the preface, then SETTINGS), lets
	// misbehave write what it will, and waits for the server to close the connection, which
	// it does after it has written (or held back) its line.
	h2 := func(misbehave func(*http2.Framer) error) error {
		c, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			return err
		}
		defer c.Close()
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			return fmt.Errorf("ALPN: got %q, want h2", p)
		}
		if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
			return err
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			return err
		}
		if err := misbehave(fr); err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(startTimeout))
		if _, err := io.Copy(io.Discard, c); err != nil {
			return fmt.Errorf("waiting for the server to close the connection: %w", err)
		}
		return nil
	}
	goAway := func() error {
		return h2(func(fr *http2.Framer) error {
			return fr.WriteGoAway(0, http2.ErrCodeProtocol, []byte("anonymous and going"))
		})
	}
	pingOnAStream := func() error { // PING belongs to the connection (stream 0): a connection error
		return h2(func(fr *http2.Framer) error { return fr.WriteRawFrame(http2.FramePing, 0, 1, make([]byte, 8)) })
	}
	type line struct {
		Level, Msg, Reason string
		Suppressed         int
	}
	// errorLines are the lines net/http's error log made since skip lines: those it wrote as
	// they were (the message is net/http's) and those the server bounds (with a reason).
	errorLines := func(skip int) (lines []line, total int) {
		sc := bufio.NewScanner(strings.NewReader(srv.Stderr.String()))
		sc.Buffer(nil, 1<<20)
		for ; sc.Scan(); total++ {
			var l line
			if total < skip || json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if strings.HasPrefix(l.Msg, "http2: ") || strings.HasPrefix(l.Msg, "http: ") || l.Reason != "" {
				lines = append(lines, l)
			}
		}
		return lines, total
	}
	_, before := errorLines(0)
	const n = 40
	start := time.Now()
	// The connections run at once, as a flood would (a GOAWAY's connection closes a second
	// after it, when the server's graceful shutdown gives up waiting).
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		wg.Go(func() { errs <- goAway() })
		wg.Go(func() { errs <- pingOnAStream() })
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := errorLines(before)
	// At most a line a second for each kind, and one at once: how long the flood took on this
	// machine sets the bound, whatever its speed.
	if most := 2 * (int(took/time.Second) + 1); len(got) == 0 || len(got) > most {
		t.Fatalf("%d anonymous HTTP/2 connections in %s: got %d lines of net/http's error log, want 1 to %d\nstderr:\n%s",
			2*n, took.Round(time.Millisecond), len(got), most, srv.Stderr)
	}
	// Fail again, after a pause, until a line of each kind comes: it counts those held back,
	// so the lines account for every connection.
	made := map[string]int{"http2_goaway": n, "http2_connection_error": n}
	for reason, fail := range map[string]func() error{"http2_goaway": goAway, "http2_connection_error": pingOnAStream} {
		count := func() (lines, failures int) {
			got, _ := errorLines(before)
			for _, l := range got {
				if l.Reason == reason {
					lines, failures = lines+1, failures+1+l.Suppressed
				}
			}
			return lines, failures
		}
		had, _ := count()
		for deadline := time.Now().Add(startTimeout); ; {
			if now, _ := count(); now > had {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new line of reason %s within %s\nstderr:\n%s", reason, startTimeout, srv.Stderr)
			}
			time.Sleep(200 * time.Millisecond)
			if err := fail(); err != nil {
				t.Fatal(err)
			}
			made[reason]++
		}
		if _, failures := count(); failures != made[reason] {
			t.Errorf("lines of reason %s stand for %d connections, want %d (every one made)\nstderr:\n%s", reason, failures, made[reason], srv.Stderr)
		}
	}
	for _, l := range got {
		if l.Level != "WARN" || l.Reason == "" {
			t.Errorf("got a line of net/http's error log %+v, want every one at WARN with its reason", l)
		}
	}
	if status, body := srv.get(t, "/healthz", ""); status != http.StatusOK {
		t.Fatalf("GET /healthz after the connections: got %d %s, want 200", status, body)
	}
}

// TestErrorLog_EveryLineBounded: whatever net/http's error log is given, a line it has never
// seen included, a flood of distinct lines writes at most one line for each of its few kinds
// within a second, each cut to a bounded length.
func TestErrorLog_EveryLineBounded(t *testing.T) {
	var out syncBuffer
	l := newErrorLog(newLogger(&out, 0))
	kinds := []string{
		"http: TLS handshake error from 198.51.100.%d:4711: EOF",
		"http2: server: error reading preface from client 198.51.100.%d:4711: bogus greeting",
		"http2: received GOAWAY [FrameHeader GOAWAY len=%d], starting graceful shutdown",
		"http2: server connection error from 198.51.100.%d:4711: connection error: PROTOCOL_ERROR",
		"http2: timeout waiting for SETTINGS frames from 198.51.100.%d:4711",
		"timeout waiting for PING response %d",
		"http: superfluous response.WriteHeader call %d",
		"a line nobody wrote before %d " + strings.Repeat("x", 64<<10),
	}
	start := time.Now()
	for i := range 500 {
		for _, k := range kinds {
			l.Printf(k, i)
		}
	}
	took := time.Since(start)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	reasons := map[string]int{}
	for _, s := range lines {
		var line struct {
			Reason, Last string
		}
		if err := json.Unmarshal([]byte(s), &line); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		reasons[line.Reason]++
		if len(s) > 2<<10 {
			t.Errorf("got a line of %d bytes, want at most 2 KiB: %.200s…", len(s), s)
		}
	}
	if most := len(errorLogKinds) * (int(took/time.Second) + 1); len(lines) > most {
		t.Fatalf("%d lines given in %s: got %d written, want at most %d (a line a second for each of %d kinds)\n%s",
			500*len(kinds), took, len(lines), most, len(errorLogKinds), out.String())
	}
	for _, r := range []string{"tls_handshake", "http2_preface", "http2_goaway", "http2_connection_error", "http2_other", "other"} {
		if reasons[r] == 0 {
			t.Errorf("got no line of reason %s, want one at once: %v", r, reasons)
		}
	}
}
