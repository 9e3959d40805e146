package clusterdns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestServe_A(t *testing.T) {
	s := MustServe(t, testLookup)
	for _, network := range []string{"udp", "tcp"} {
		r := resolver(s, network)
		t.Run("Found/"+network, func(t *testing.T) {
			// LookupHost asks A and AAAA: the empty AAAA answer must not fail it.
			got, err := r.LookupHost(timeoutCtx(t), "terdut-server.terdut.svc.cluster.local.")
			if err != nil {
				t.Fatalf("LookupHost: %v", err)
			}
			if want := []string{"10.96.0.20"}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
		t.Run("NotFound/"+network, func(t *testing.T) {
			// A pod's search path makes names like this one before the real one.
			_, err := r.LookupHost(timeoutCtx(t), "kubernetes.default.svc.cluster.local.terdut.svc.cluster.local.")
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Fatalf("got %v, want a *net.DNSError with IsNotFound", err)
			}
		})
	}
	t.Run("SearchPath", func(t *testing.T) {
		// What a pod in namespace terdut does for "kubernetes.default.svc"
		// with ndots:5: every search domain first, the name as given last.
		r := resolver(s, "udp")
		for _, name := range []string{
			"kubernetes.default.svc.terdut.svc.cluster.local.",
			"kubernetes.default.svc.svc.cluster.local.",
		} {
			if _, err := r.LookupHost(timeoutCtx(t), name); err == nil {
				t.Errorf("%s: got an answer, want not found", name)
			}
		}
		got, err := r.LookupHost(timeoutCtx(t), "kubernetes.default.svc.cluster.local.")
		if err != nil || !slices.Equal(got, []string{"10.96.0.1"}) {
			t.Fatalf("got %v %v, want [10.96.0.1]", got, err)
		}
	})
}

func TestServe_Answers(t *testing.T) {
	s := MustServe(t, testLookup)
	for _, tc := range []struct {
		name  string
		qname string
		typ   dnsmessage.Type
		rcode dnsmessage.RCode
		addrs []netip.Addr
	}{
		{"A", "terdut-server.terdut.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, testNames["terdut-server.terdut.svc.cluster.local"]},
		{"UpperCase", "Terdut-Server.TERDUT.svc.Cluster.Local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, testNames["terdut-server.terdut.svc.cluster.local"]},
		{"OnlyIPv4", "dual.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []netip.Addr{netip.MustParseAddr("10.96.0.30")}},
		{"AAAA", "terdut-server.terdut.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"MX", "terdut-server.terdut.svc.cluster.local.", dnsmessage.TypeMX, dnsmessage.RCodeSuccess, nil},
		{"NotFound", "nothere.terdut.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"NotFoundAAAA", "nothere.terdut.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeNameError, nil},
		{"LookupError", "broken.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeServerFailure, nil},
		{"Outside", "example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, nil},
		{"OutsideSameEnding", "xcluster.local.", dnsmessage.TypeA, dnsmessage.RCodeRefused, nil},
		{"OutsideDomainInside", "cluster.local.example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, nil},
		{"Root", ".", dnsmessage.TypeNS, dnsmessage.RCodeRefused, nil},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+network, func(t *testing.T) {
				m := MustExchange(t, s, network, MustQuery(t, tc.qname, tc.typ))
				if m.ID != 0x1234 || !m.Response {
					t.Fatalf("got ID %#x response %v, want 0x1234 true", m.ID, m.Response)
				}
				if m.RCode != tc.rcode {
					t.Fatalf("got rcode %v, want %v", m.RCode, tc.rcode)
				}
				// Go's resolver fails a non-authoritative empty answer as a lame referral.
				wantAA := tc.rcode == dnsmessage.RCodeSuccess || tc.rcode == dnsmessage.RCodeNameError
				if m.Authoritative != wantAA {
					t.Fatalf("got authoritative %v, want %v", m.Authoritative, wantAA)
				}
				if len(m.Questions) != 1 || m.Questions[0].Name.String() != tc.qname {
					t.Fatalf("got questions %v, want the one asked", m.Questions)
				}
				if got := answerAddrs(m); !slices.Equal(got, tc.addrs) || len(m.Answers) != len(tc.addrs) {
					t.Fatalf("got answers %v, want %v", m.Answers, tc.addrs)
				}
				for _, r := range m.Answers {
					if r.Header.TTL != 5 {
						t.Fatalf("got TTL %d, want 5", r.Header.TTL)
					}
				}
			})
		}
	}
}

func TestServe_Refused(t *testing.T) {
	s := MustServe(t, testLookup)
	_, err := resolver(s, "udp").LookupHost(timeoutCtx(t), "example.com.")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || dnsErr.IsNotFound {
		t.Fatalf("got %v, want a *net.DNSError that is not IsNotFound", err)
	}
}

func TestServe_Truncated(t *testing.T) {
	s := MustServe(t, testLookup)
	m := MustExchange(t, s, "udp", MustQuery(t, "many.cluster.local.", dnsmessage.TypeA))
	if !m.Truncated || len(m.Answers) != 0 {
		t.Fatalf("UDP: got truncated %v with %d answers, want true with 0", m.Truncated, len(m.Answers))
	}
	m = MustExchange(t, s, "tcp", MustQuery(t, "many.cluster.local.", dnsmessage.TypeA))
	if m.Truncated || !slices.Equal(answerAddrs(m), testNames["many.cluster.local"]) {
		t.Fatalf("TCP: got truncated %v with %v, want false with all 40", m.Truncated, answerAddrs(m))
	}
	// Go's resolver asks again over TCP on its own.
	got, err := resolver(s, "").LookupNetIP(timeoutCtx(t), "ip4", "many.cluster.local.")
	if err != nil || len(got) != 40 {
		t.Fatalf("got %d addresses (%v), want 40", len(got), err)
	}
}

func TestServe_Concurrent(t *testing.T) {
	s := MustServe(t, testLookup)
	ctx := timeoutCtx(t) // for the whole test: a broken server fails it, not hangs it
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		r := resolver(s, []string{"udp", "tcp"}[g%2])
		wg.Go(func() {
			for range 50 {
				got, err := r.LookupHost(ctx, "terdut-server.terdut.svc.cluster.local.")
				if err != nil || !slices.Equal(got, []string{"10.96.0.20"}) {
					errs <- fmt.Errorf("found name: got %v %v", got, err)
					return
				}
				_, err = r.LookupHost(ctx, "nothere.terdut.svc.cluster.local.")
				if dnsErr, ok := errors.AsType[*net.DNSError](err); !ok || !dnsErr.IsNotFound {
					errs <- fmt.Errorf("unknown name: got %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
