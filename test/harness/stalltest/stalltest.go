// Package stalltest is a peer that accepts connections and never answers them in time: a
// provider or issuer that is hung rather than down. Tests point terdut-server at it and
// observe, through Open, that a request still waits at it while other requests are answered.
package stalltest

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Mode is how the peer (fails to) answer.
type Mode int

const (
	// Silent reads the request and writes nothing.
	Silent Mode = iota
	// Trickle reads the request and writes a well-formed HTTP answer one byte a second,
	// so that a client sees progress and never a whole answer within its timeout.
	Trickle
)

// Modes names every Mode, for tests that run once against each.
var Modes = map[string]Mode{"Silent": Silent, "Trickle": Trickle}

// trickleEvery is how often Trickle writes one byte.
const trickleEvery = time.Second

// trickled is what Trickle sends: long enough to take over a minute.
var trickled = []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\n{}")

// Peer holds every connection it takes until the other side closes it or the test ends.
type Peer struct {
	mode Mode
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	taken    int
	open     int
	requests int
}

// New starts a peer on a loopback port; it stops when the test ends.
func New(tb testing.TB, mode Mode) *Peer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Peer{mode: mode, ln: ln, stop: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.Hold(c)
		}
	})
	tb.Cleanup(p.close)
	return p
}

// URL is the peer's address as an http URL with no path.
func (p *Peer) URL() string { return "http://" + p.ln.Addr().String() }

// Handler takes over the connection of every request it is given (hijacking it after the
// request's headers were read), so that a real server can answer some requests and stall
// others. The request counts as read.
func (p *Peer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.take(c, true)
	})
}

// Hold takes c: it reads what c sends and answers as the peer's mode says.
func (p *Peer) Hold(c net.Conn) { p.take(c, false) }

func (p *Peer) take(c net.Conn, requested bool) {
	p.mu.Lock()
	select {
	case <-p.stop:
		p.mu.Unlock()
		_ = c.Close()
		return
	default:
	}
	p.conns[c] = struct{}{}
	p.taken++
	p.open++
	if requested {
		p.requests++
	}
	// Added under the lock that close takes before it waits, so never during its Wait.
	p.wg.Add(1)
	if p.mode == Trickle {
		p.wg.Add(1)
	}
	p.mu.Unlock()
	gotRequest := make(chan struct{})
	closed := make(chan struct{})
	if requested {
		close(gotRequest)
	}
	go func() {
		defer p.wg.Done()
		defer close(closed)
		p.read(c, requested, gotRequest)
		p.mu.Lock()
		p.open--
		delete(p.conns, c)
		p.mu.Unlock()
		_ = c.Close()
	}()
	if p.mode == Trickle {
		go func() {
			defer p.wg.Done()
			p.trickle(c, gotRequest, closed)
		}()
	}
}

// read consumes c until the other side closes it, noting the end of the request's headers.
func (p *Peer) read(c net.Conn, requested bool, gotRequest chan struct{}) {
	var head []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if !requested {
			head = append(head, buf[:n]...)
			if bytes.Contains(head, []byte("\r\n\r\n")) {
				requested, head = true, nil
				p.mu.Lock()
				p.requests++
				p.mu.Unlock()
				close(gotRequest)
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Peer) trickle(c net.Conn, gotRequest, closed chan struct{}) {
	select {
	case <-gotRequest:
	case <-closed:
		return
	}
	t := time.NewTicker(trickleEvery)
	defer t.Stop()
	for _, b := range trickled {
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
		select {
		case <-t.C:
		case <-closed:
			return
		}
	}
}

// Taken is how many connections the peer has taken.
func (p *Peer) Taken() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.taken
}

// Requests is how many requests the peer has read in full (their headers).
func (p *Peer) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// Open is how many of the connections taken the other side still holds open: requests
// still waiting for the peer's answer.
func (p *Peer) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// MustWaitRequest waits until a request has been read in full and still waits for its
// answer: the client is now stuck at the peer.
func (p *Peer) MustWaitRequest(tb testing.TB, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for p.Requests() == 0 || p.Open() == 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("no request waiting at the stalled peer after %s: got %d requests, %d open", within, p.Requests(), p.Open())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// close stops accepting and closes every connection held.
func (p *Peer) close() {
	p.mu.Lock()
	close(p.stop)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
