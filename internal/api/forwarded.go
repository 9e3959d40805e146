package api

import (
	"net/http"
	"net/netip"
	"strings"
)

// How a proxy that --trusted-proxies names says whom it forwards for. It may say so in any of
// three headers; a client can send each of them too, and a proxy passes on, untouched, those
// it does not write itself. So an account that cannot be read names no client, never the
// proxy (whose address, on the server's machine, is loopback), and the open claim is taken
// only when every account sent names a client on this machine (localClient).

// forwardingHeaders are the headers in which a proxy names its client. clientAddr reads only
// the one that the trusted proxies write (Options.ForwardedHeader); localClient, for the open
// claim, takes a request as local only when every one of them that it has says so.
var forwardingHeaders = [...]string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"}

// ForwardedHeader returns the canonical name of the forwarding header name, matched without
// regard to case ("" is X-Forwarded-For), and whether it is one of the headers a proxy names
// its client in.
func ForwardedHeader(name string) (string, bool) {
	if name == "" {
		return forwardingHeaders[0], true
	}
	for _, h := range forwardingHeaders {
		if strings.EqualFold(h, name) {
			return h, true
		}
	}
	return "", false
}

// sentHeader reports whether h has header name at all, even empty.
func sentHeader(h http.Header, name string) bool { return len(h.Values(name)) > 0 }

// forwardedClient returns the client that h's header name (one of forwardingHeaders) names,
// behind the proxies that trusted reports, and whether it names one. Proxies append the
// address they saw, so the hops are read from the nearest: the first that is not a trusted
// proxy is the client (those to its left are its own word), or, when every hop is one, the
// farthest. A hop that does not name an address (an X-Forwarded-For entry that is not a bare
// address, such as unknown or 203.0.113.9:4711; a Forwarded element without for=, or with
// for=unknown or an obfuscated identifier) stops the reading: the header names no client.
// So does a header that does not parse, and an X-Real-IP sent more than once.
func forwardedClient(h http.Header, name string, trusted func(netip.Addr) bool) (netip.Addr, bool) {
	values := h.Values(name)
	var hops []netip.Addr
	switch name {
	case "X-Forwarded-For":
		for _, e := range strings.Split(strings.Join(values, ","), ",") {
			hops = append(hops, bareAddr(strings.TrimSpace(e)))
		}
	case "Forwarded":
		var ok bool
		if hops, ok = forwardedFor(values); !ok {
			return netip.Addr{}, false
		}
	case "X-Real-Ip":
		if len(values) != 1 {
			return netip.Addr{}, false
		}
		hops = []netip.Addr{bareAddr(strings.TrimSpace(values[0]))}
	}
	var client netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		if client = hops[i]; !client.IsValid() {
			return netip.Addr{}, false
		}
		if !trusted(client) {
			break
		}
	}
	return client, client.IsValid()
}

// bareAddr parses an address with neither port nor brackets; the zero Addr if s is not one.
func bareAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// forwardedFor reads Forwarded header values (RFC 7239): the for= node of each element, the
// nearest proxy's last, the zero Addr for an element that names no address. ok is false if
// a value does not parse, or an element has more than one for=.
func forwardedFor(values []string) (nodes []netip.Addr, ok bool) {
	for _, v := range values {
		p := forwardedParser{s: v}
		for {
			p.skipSpace()
			if p.done() {
				break
			}
			if p.s[p.i] == ',' { // an empty list element, which a recipient ignores
				p.i++
				continue
			}
			node, ok := p.element()
			if !ok {
				return nil, false
			}
			nodes = append(nodes, node)
			p.skipSpace()
			if !p.done() && p.s[p.i] != ',' {
				return nil, false
			}
		}
	}
	return nodes, true
}

type forwardedParser struct {
	s string
	i int
}

func (p *forwardedParser) done() bool { return p.i >= len(p.s) }

func (p *forwardedParser) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element reads forwarded-pairs separated by ";" up to the element's end (a "," or the end).
func (p *forwardedParser) element() (node netip.Addr, ok bool) {
	seenFor := false
	for {
		p.skipSpace()
		if !p.done() && p.s[p.i] != ',' && p.s[p.i] != ';' {
			name := p.token()
			if name == "" || p.done() || p.s[p.i] != '=' {
				return netip.Addr{}, false
			}
			p.i++
			value, ok := p.value()
			if !ok {
				return netip.Addr{}, false
			}
			if strings.EqualFold(name, "for") {
				if seenFor {
					return netip.Addr{}, false
				}
				seenFor, node = true, forwardedNode(value)
			}
			p.skipSpace()
		}
		if p.done() || p.s[p.i] == ',' {
			return node, true
		}
		if p.s[p.i] != ';' {
			return netip.Addr{}, false
		}
		p.i++
	}
}

func (p *forwardedParser) token() string {
	start := p.i
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a token or a quoted-string, unquoted.
func (p *forwardedParser) value() (string, bool) {
	if p.done() || p.s[p.i] != '"' {
		t := p.token()
		return t, t != ""
	}
	var b strings.Builder
	for p.i++; !p.done(); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return b.String(), true
		case c == '\\' && p.i+1 < len(p.s):
			p.i++
			b.WriteByte(p.s[p.i])
		case c == '\t' || c >= ' ' && c != 0x7f:
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return "", false // no closing quote
}

func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// forwardedNode reads a node (RFC 7239 section 6): an IPv4 address or a bracketed IPv6 one,
// with or without a port, which is ignored. Anything else (unknown, an obfuscated identifier
// such as _hidden, a bare IPv6 address) names no address: the zero Addr.
func forwardedNode(node string) netip.Addr {
	host, port := node, ""
	bracketed := strings.HasPrefix(node, "[")
	if bracketed {
		end := strings.IndexByte(node, ']')
		if end < 0 {
			return netip.Addr{}
		}
		host, port = node[1:end], node[end+1:]
	} else if i := strings.IndexByte(node, ':'); i >= 0 {
		host, port = node[:i], node[i:]
	}
	if port != "" && (port[0] != ':' || !validPort(port[1:])) {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Is6() != bracketed {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}

// validPort reports whether s is a node-port: 1 to 5 digits, or an obfuscated port ("_" then
// letters, digits, ".", "_" or "-").
func validPort(s string) bool {
	if s == "" {
		return false
	}
	obfuscated := s[0] == '_'
	for i := range len(s) {
		c := s[i]
		if !('0' <= c && c <= '9' || obfuscated && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("._-", c) >= 0)) {
			return false
		}
	}
	return obfuscated && len(s) > 1 || !obfuscated && len(s) <= 5
}
