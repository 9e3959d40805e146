package clusterdns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestServer_Close(t *testing.T) {
	entered := make(chan struct{})
	blocking := func(ctx context.Context, name string) ([]netip.Addr, bool, error) {
		close(entered)
		<-ctx.Done()
		return nil, false, ctx.Err()
	}
	s, err := Serve(context.Background(), "127.0.0.1:0", "cluster.local", blocking)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	u, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, err := u.Write(MustQuery(t, "slow.cluster.local.", dnsmessage.TypeA)); err != nil {
		t.Fatal(err)
	}
	<-entered

	// Close returns only once the lookup in progress and the idle TCP
	// connection have been given up: without that, this test hangs.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := idle.SetReadDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("idle TCP connection after Close: got %v, want it closed", err)
	}
	if c, err := net.Dial("tcp", s.Addr().String()); err == nil {
		c.Close()
		t.Fatal("TCP dial after Close: got a connection, want refused")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestServe_ContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Serve(ctx, "127.0.0.1:0", "cluster.local", testLookup)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cancel()
	// The listeners close on their own, soon: wait for it, up to hangGuard.
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("TCP dial after the context was done: still accepted, want refused")
		}
	}
}

func TestServe_Errors(t *testing.T) {
	for _, tc := range []struct{ name, addr, domain string }{
		{"NoPort", "127.0.0.1", "cluster.local"},
		{"HostName", "localhost:0", "cluster.local"},
		{"EmptyDomain", "127.0.0.1:0", "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Serve(context.Background(), tc.addr, tc.domain, testLookup); err == nil {
				s.Close()
				t.Fatal("got a server, want an error")
			}
		})
	}
	t.Run("PortTaken", func(t *testing.T) {
		s := MustServe(t, testLookup)
		if s2, err := Serve(context.Background(), s.Addr().String(), "cluster.local", testLookup); err == nil {
			s2.Close()
			t.Fatal("got a second server on the same port, want an error")
		}
	})
}
