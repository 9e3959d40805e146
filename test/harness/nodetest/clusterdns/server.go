// Package clusterdns is the small DNS server a test's Kubernetes node points its
// pods at instead of CoreDNS. It answers only for the cluster domain, from a
// Lookup the test supplies, and refuses every other name: no query is ever
// forwarded, so a pod's DNS traffic stays on the test's own network.
package clusterdns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Lookup returns the IPv4 addresses of name, a fully qualified lower-case name
// without the trailing dot, e.g. "terdut-server.terdut.svc.cluster.local".
// ok is false when the name does not exist. An error makes the server answer
// SERVFAIL.
type Lookup func(ctx context.Context, name string) (addrs []netip.Addr, ok bool, err error)

const (
	ttl            = 5                // seconds a client may cache an answer
	maxUDPAnswer   = 512              // bigger answers go by TCP (RFC 1035 4.2.1)
	lookupTimeout  = 5 * time.Second  // bounds each call of Lookup
	tcpIdleTimeout = 10 * time.Second // bounds each query-answer round on a TCP connection
	maxInFlight    = 64               // UDP queries answered at once, and TCP connections open at once
)

// Server answers DNS queries over UDP and TCP on one address until Close.
type Server struct {
	domain string
	lookup Lookup
	udp    *net.UDPConn
	tcp    *net.TCPListener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Serve listens on addr ("IP:port"; port 0 picks one port free for both UDP and
// TCP) and answers queries for names under domain (e.g. "cluster.local") from
// lookup until Close is called or ctx is done. It returns an error when addr is
// not an IP and port, domain is empty, or the address cannot be bound.
func Serve(ctx context.Context, addr string, domain string, lookup Lookup) (*Server, error) {
	domain = strings.Trim(lowerASCII(domain), ".")
	if domain == "" {
		return nil, errors.New("clusterdns: empty domain")
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: address %q: want IP:port: %w", addr, err)
	}
	udp, tcp, err := listen(ap)
	if err != nil {
		return nil, fmt.Errorf("clusterdns: listen on %s: %w", addr, err)
	}
	s := &Server{domain: domain, lookup: lookup, udp: udp, tcp: tcp}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Go(func() {
		<-s.ctx.Done()
		udp.Close()
		tcp.Close()
	})
	s.wg.Go(s.serveUDP)
	s.wg.Go(s.serveTCP)
	return s, nil
}

// listen binds UDP and TCP to the same address, so that one address, as
// resolv.conf and the kubelet's clusterDNS want it, reaches both.
func listen(ap netip.AddrPort) (*net.UDPConn, *net.TCPListener, error) {
	for range 10 {
		udp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return nil, nil, err
		}
		bound := udp.LocalAddr().(*net.UDPAddr).AddrPort()
		tcp, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(bound))
		if err == nil {
			return udp, tcp, nil
		}
		udp.Close()
		// The port UDP picked may be taken for TCP: pick another.
		if ap.Port() != 0 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, err
		}
	}
	return nil, nil, errors.New("no port found free for both UDP and TCP")
}

// Addr is the address the server answers on, over both UDP and TCP.
func (s *Server) Addr() netip.AddrPort {
	ap := s.udp.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Close stops both listeners, closes open TCP connections, cancels lookups in
// progress and waits until every goroutine of the server has returned.
func (s *Server) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Server) serveUDP() {
	sem := make(chan struct{}, maxInFlight)
	for {
		buf := make([]byte, 1500)
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		sem <- struct{}{}
		s.wg.Go(func() {
			defer func() { <-sem }()
			if msg := s.respond(s.ctx, buf[:n], maxUDPAnswer); msg != nil {
				_, _ = s.udp.WriteToUDPAddrPort(msg, from)
			}
		})
	}
}

func (s *Server) serveTCP() {
	sem := make(chan struct{}, maxInFlight)
	for {
		c, err := s.tcp.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // too many connections: the client retries
			continue
		}
		s.wg.Go(func() {
			defer func() { <-sem }()
			s.serveConn(c)
		})
	}
}

// serveConn answers length-prefixed queries on c (RFC 1035 4.2.2) until the
// client closes it, sends something unanswerable, idles, or the server closes.
func (s *Server) serveConn(c net.Conn) {
	closed := make(chan struct{})
	stop := context.AfterFunc(s.ctx, func() {
		c.Close()
		close(closed)
	})
	defer func() {
		if stop() {
			c.Close()
		} else {
			<-closed
		}
	}()
	for {
		if err := c.SetDeadline(time.Now().Add(tcpIdleTimeout)); err != nil {
			return
		}
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		msg := s.respond(s.ctx, query, 65535)
		if msg == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(msg)), uint16(len(msg)))
		if _, err := c.Write(append(out, msg...)); err != nil {
			return
		}
	}
}
