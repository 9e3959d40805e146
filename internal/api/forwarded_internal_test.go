package api

import (
	"net/http"
	"net/netip"
	"testing"
)

// TestForwardedClient: the client each forwarding header names behind the trusted proxies
// (127.0.0.0/8, ::1, 10.0.0.0/8), read from the nearest hop; a hop that names no address
// stops the reading, and the header names no client (never the proxy).
func TestForwardedClient(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	trusted := func(a netip.Addr) bool {
		for _, p := range proxies {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name   string
		header string
		values []string
		want   string // "" for no client
	}{
		{"XFF/OK", "X-Forwarded-For", []string{"203.0.113.9"}, "203.0.113.9"},
		{"XFF/OKNearestUntrusted", "X-Forwarded-For", []string{"127.0.0.1, 198.51.100.1, 10.1.1.1"}, "198.51.100.1"},
		{"XFF/OKSeveralLines", "X-Forwarded-For", []string{"198.51.100.1", "203.0.113.9, 10.0.0.2"}, "203.0.113.9"},
		{"XFF/OKAllTrusted", "X-Forwarded-For", []string{"127.0.0.1, 10.0.0.2"}, "127.0.0.1"},
		{"XFF/OKMappedIPv4", "X-Forwarded-For", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"XFF/OKIPv6", "X-Forwarded-For", []string{"2001:db8::1"}, "2001:db8::1"},
		{"XFF/OKClientsJunkLeftOfIt", "X-Forwarded-For", []string{"unknown, 203.0.113.9"}, "203.0.113.9"},
		{"XFF/ErrUnknown", "X-Forwarded-For", []string{"unknown"}, ""},
		{"XFF/ErrPort", "X-Forwarded-For", []string{"203.0.113.9:4711"}, ""},
		{"XFF/ErrBracketed", "X-Forwarded-For", []string{"[2001:db8::1]"}, ""},
		{"XFF/ErrEmpty", "X-Forwarded-For", []string{""}, ""},
		{"XFF/ErrEmptyEntry", "X-Forwarded-For", []string{"203.0.113.9,"}, ""},
		{"XFF/ErrBehindATrustedHop", "X-Forwarded-For", []string{"unknown, 127.0.0.1"}, ""},
		{"XFF/ErrName", "X-Forwarded-For", []string{"localhost"}, ""},

		{"Forwarded/OK", "Forwarded", []string{"for=203.0.113.9"}, "203.0.113.9"},
		{"Forwarded/OKCase", "Forwarded", []string{"For=203.0.113.9;PROTO=https"}, "203.0.113.9"},
		{"Forwarded/OKQuotedPort", "Forwarded", []string{`for="203.0.113.9:4711"`}, "203.0.113.9"},
		{"Forwarded/OKIPv6", "Forwarded", []string{`for="[2001:db8::1]:4711"`}, "2001:db8::1"},
		{"Forwarded/OKIPv6NoPort", "Forwarded", []string{`for="[2001:db8::1]"`}, "2001:db8::1"},
		{"Forwarded/OKObfuscatedPort", "Forwarded", []string{`for="203.0.113.9:_p1"`}, "203.0.113.9"},
		{"Forwarded/OKPairs", "Forwarded", []string{`proto=https; for=203.0.113.9 ;by="[::1]:80";host="a;b,c"`}, "203.0.113.9"},
		{"Forwarded/OKChain", "Forwarded", []string{"for=198.51.100.1, for=203.0.113.9;proto=http, for=10.0.0.3"}, "203.0.113.9"},
		{"Forwarded/OKChainLines", "Forwarded", []string{"for=198.51.100.1", "for=203.0.113.9", "for=127.0.0.1"}, "203.0.113.9"},
		{"Forwarded/OKEmptyElement", "Forwarded", []string{"for=203.0.113.9, ,"}, "203.0.113.9"},
		{"Forwarded/OKLoopbackIPv6", "Forwarded", []string{`for="[::1]"`}, "::1"},
		{"Forwarded/OKQuotedPair", "Forwarded", []string{`for="203.0.113.\9"`}, "203.0.113.9"},
		{"Forwarded/ErrUnknown", "Forwarded", []string{"for=unknown"}, ""},
		{"Forwarded/ErrObfuscated", "Forwarded", []string{"for=_hidden"}, ""},
		{"Forwarded/ErrObfuscatedBehindTrusted", "Forwarded", []string{"for=_hidden, for=127.0.0.1"}, ""},
		{"Forwarded/ErrNoFor", "Forwarded", []string{"proto=https;by=127.0.0.1"}, ""},
		{"Forwarded/ErrNearestHasNoFor", "Forwarded", []string{"for=127.0.0.1, proto=https"}, ""},
		{"Forwarded/ErrTwoFors", "Forwarded", []string{"for=127.0.0.1;for=203.0.113.9"}, ""},
		{"Forwarded/ErrUnquotedPort", "Forwarded", []string{"for=203.0.113.9:4711"}, ""},
		{"Forwarded/ErrUnquotedIPv6", "Forwarded", []string{"for=[2001:db8::1]"}, ""},
		{"Forwarded/ErrIPv6Unbracketed", "Forwarded", []string{`for="2001:db8::1"`}, ""},
		{"Forwarded/ErrIPv4Bracketed", "Forwarded", []string{`for="[203.0.113.9]"`}, ""},
		{"Forwarded/ErrBadPort", "Forwarded", []string{`for="203.0.113.9:port"`}, ""},
		{"Forwarded/ErrLongPort", "Forwarded", []string{`for="203.0.113.9:123456"`}, ""},
		{"Forwarded/ErrUnclosedQuote", "Forwarded", []string{`for="127.0.0.1`}, ""},
		{"Forwarded/ErrGarbageAfterValue", "Forwarded", []string{`for="127.0.0.1"x`}, ""},
		{"Forwarded/ErrNoValue", "Forwarded", []string{"for="}, ""},
		{"Forwarded/ErrNoEquals", "Forwarded", []string{"for"}, ""},
		{"Forwarded/ErrBareAddress", "Forwarded", []string{"127.0.0.1"}, ""},
		{"Forwarded/ErrClientsBadLineFirst", "Forwarded", []string{`for="x`, "for=203.0.113.9"}, ""},
		{"Forwarded/ErrEmpty", "Forwarded", []string{""}, ""},
		{"Forwarded/ErrControl", "Forwarded", []string{"for=\"127.0.0.1\x00\""}, ""},

		{"XRealIP/OK", "X-Real-Ip", []string{"203.0.113.9"}, "203.0.113.9"},
		{"XRealIP/OKTrusted", "X-Real-Ip", []string{"10.0.0.7"}, "10.0.0.7"},
		{"XRealIP/ErrTwice", "X-Real-Ip", []string{"127.0.0.1", "203.0.113.9"}, ""},
		{"XRealIP/ErrList", "X-Real-Ip", []string{"127.0.0.1, 203.0.113.9"}, ""},
		{"XRealIP/ErrPort", "X-Real-Ip", []string{"203.0.113.9:4711"}, ""},
		{"XRealIP/ErrUnknown", "X-Real-Ip", []string{"unknown"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.values {
				h.Add(tc.header, v)
			}
			got, ok := forwardedClient(h, http.CanonicalHeaderKey(tc.header), trusted)
			if tc.want == "" {
				if ok || got.IsValid() {
					t.Fatalf("%s: %q: got %v, %v, want no client", tc.header, tc.values, got, ok)
				}
				return
			}
			if want := netip.MustParseAddr(tc.want); !ok || got != want {
				t.Fatalf("%s: %q: got %v, %v, want %v", tc.header, tc.values, got, ok, want)
			}
		})
	}
}
