package clusterdns

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// hangGuard bounds every network wait in these tests so that a broken server
// fails a test instead of hanging it; no test depends on it being short.
const hangGuard = 30 * time.Second

var testNames = map[string][]netip.Addr{
	"terdut-server.terdut.svc.cluster.local": {netip.MustParseAddr("10.96.0.20")},
	"kubernetes.default.svc.cluster.local":   {netip.MustParseAddr("10.96.0.1")},
	"dual.cluster.local":                     {netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.96.0.30")},
	"many.cluster.local":                     manyAddrs(40),
}

func manyAddrs(n int) []netip.Addr {
	var addrs []netip.Addr
	for i := range n {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 97, 0, byte(i + 1)}))
	}
	return addrs
}

func testLookup(ctx context.Context, name string) ([]netip.Addr, bool, error) {
	if name == "broken.cluster.local" {
		return nil, false, errors.New("kube-apiserver unreachable")
	}
	addrs, ok := testNames[name]
	return addrs, ok, nil
}

// MustServe starts a server for cluster.local on a free loopback port and
// closes it when the test ends.
func MustServe(tb testing.TB, lookup Lookup) *Server {
	tb.Helper()
	s, err := Serve(context.Background(), "127.0.0.1:0", "cluster.local", lookup)
	if err != nil {
		tb.Fatalf("Serve: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// resolver returns Go's own resolver sending every query to s, over network
// ("udp" or "tcp") when given, else over whatever the resolver asks for.
func resolver(s *Server, network string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, n, _ string) (net.Conn, error) {
		if network != "" {
			n = network
		}
		var d net.Dialer
		return d.DialContext(ctx, n, s.Addr().String())
	}}
}

func MustQuery(tb testing.TB, name string, typ dnsmessage.Type) []byte {
	tb.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x1234, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		tb.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		tb.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		tb.Fatal(err)
	}
	return msg
}

// MustExchange sends msg to s over network ("udp" or "tcp") and returns the
// parsed answer.
func MustExchange(tb testing.TB, s *Server, network string, msg []byte) dnsmessage.Message {
	tb.Helper()
	c, err := net.Dial(network, s.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(hangGuard)); err != nil {
		tb.Fatal(err)
	}
	var raw []byte
	if network == "udp" {
		if _, err := c.Write(msg); err != nil {
			tb.Fatal(err)
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err != nil {
			tb.Fatalf("read answer: %v", err)
		}
		raw = buf[:n]
	} else {
		raw = MustExchangeStream(tb, c, msg)
	}
	var m dnsmessage.Message
	if err := m.Unpack(raw); err != nil {
		tb.Fatalf("unpack answer: %v", err)
	}
	return m
}

// MustExchangeStream writes msg length-prefixed on c and reads one
// length-prefixed answer.
func MustExchangeStream(tb testing.TB, c net.Conn, msg []byte) []byte {
	tb.Helper()
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)); err != nil {
		tb.Fatal(err)
	}
	var size [2]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		tb.Fatalf("read answer length: %v", err)
	}
	raw := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(c, raw); err != nil {
		tb.Fatalf("read answer: %v", err)
	}
	return raw
}

func answerAddrs(m dnsmessage.Message) []netip.Addr {
	var addrs []netip.Addr
	for _, r := range m.Answers {
		if a, ok := r.Body.(*dnsmessage.AResource); ok {
			addrs = append(addrs, netip.AddrFrom4(a.A))
		}
	}
	return addrs
}

func timeoutCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	tb.Cleanup(cancel)
	return ctx
}
