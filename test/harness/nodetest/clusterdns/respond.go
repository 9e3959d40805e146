package clusterdns

import (
	"context"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// respond returns the answer to one query message, or nil when the packet is
// to be dropped: too short to carry an ID, or itself a response. An answer
// longer than maxSize is replaced by an empty one with the TC bit set, which
// tells the client to ask again over TCP.
func (s *Server) respond(ctx context.Context, query []byte, maxSize int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	if h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeNotImplemented
		return build(resp, nil, nil)
	}
	q, err := p.Question()
	if err == nil {
		_, err = p.Question()
		if err == dnsmessage.ErrSectionDone {
			err = nil
		} else if err == nil {
			err = dnsmessage.ErrSectionDone // more than one question: no client sends that
		}
	}
	if err != nil {
		resp.RCode = dnsmessage.RCodeFormatError
		return build(resp, nil, nil)
	}

	name := strings.TrimSuffix(lowerASCII(q.Name.String()), ".")
	if q.Class != dnsmessage.ClassINET || (name != s.domain && !strings.HasSuffix(name, "."+s.domain)) {
		resp.RCode = dnsmessage.RCodeRefused
		return build(resp, &q, nil)
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	addrs, ok, err := s.lookup(lctx, name)
	cancel()
	switch {
	case err != nil:
		resp.RCode = dnsmessage.RCodeServerFailure
		return build(resp, &q, nil)
	case !ok:
		resp.Authoritative = true
		resp.RCode = dnsmessage.RCodeNameError
		return build(resp, &q, nil)
	}
	// Authoritative matters for an empty answer too: Go's resolver takes an
	// empty non-authoritative answer for a lame referral and fails.
	resp.Authoritative = true
	var v4 []netip.Addr
	if q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			if a = a.Unmap(); a.Is4() {
				v4 = append(v4, a)
			}
		}
	}
	msg := build(resp, &q, v4)
	if len(msg) > maxSize {
		resp.Truncated = true
		msg = build(resp, &q, nil)
	}
	return msg
}

// build packs a response. A question that was parsed always packs again, so
// the only failure left is a bug; it answers SERVFAIL without the question.
func build(h dnsmessage.Header, q *dnsmessage.Question, addrs []netip.Addr) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	err := b.StartQuestions()
	if q != nil && err == nil {
		err = b.Question(*q)
	}
	if err == nil {
		err = b.StartAnswers()
	}
	for _, a := range addrs {
		if err == nil {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: ttl}
			err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		}
	}
	var msg []byte
	if err == nil {
		msg, err = b.Finish()
	}
	if err != nil && q != nil {
		h.RCode = dnsmessage.RCodeServerFailure
		return build(h, nil, nil)
	}
	return msg
}

// lowerASCII lower-cases the ASCII letters of s and leaves every other byte
// alone: DNS names compare case-insensitively in ASCII only (RFC 4343).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
