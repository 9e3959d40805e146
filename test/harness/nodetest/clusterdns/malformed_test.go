package clusterdns

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// header is a query header with ID 0x1234 and the given question count.
func header(qdcount uint16) []byte {
	return []byte{0x12, 0x34, 0x01, 0x00, byte(qdcount >> 8), byte(qdcount), 0, 0, 0, 0, 0, 0}
}

var malformed = map[string][]byte{
	"Empty":            {},
	"Short":            {0x12, 0x34, 0x01},
	"NoQuestion":       header(0),
	"MissingQuestion":  header(1),
	"TruncatedName":    append(header(1), 5, 'a', 'b'),
	"NameLoop":         append(header(1), 0xc0, 12, 0, 1, 0, 1), // a pointer to itself
	"DotInLabel":       append(header(1), 3, 'a', '.', 'b', 0, 0, 1, 0, 1),
	"TwoQuestions":     append(append(header(2), 1, 'a', 0, 0, 1, 0, 1), 1, 'b', 0, 0, 1, 0, 1),
	"Response":         {0x12, 0x34, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0},
	"UpdateOpcode":     {0x12, 0x34, 0x28, 0x00, 0, 0, 0, 0, 0, 0, 0, 0},
	"NoQuestionType":   append(header(1), 1, 'a', 0),
	"HugeLabelCount":   append(header(0xffff), 0),
	"ReservedLabelBit": append(header(1), 0x80, 0, 0, 1, 0, 1),
}

// wantRCode is the answer each malformed packet gets; absent ones are dropped.
var wantRCode = map[string]dnsmessage.RCode{
	"NoQuestion":       dnsmessage.RCodeFormatError,
	"MissingQuestion":  dnsmessage.RCodeFormatError,
	"TruncatedName":    dnsmessage.RCodeFormatError,
	"NameLoop":         dnsmessage.RCodeFormatError,
	"DotInLabel":       dnsmessage.RCodeFormatError,
	"TwoQuestions":     dnsmessage.RCodeFormatError,
	"UpdateOpcode":     dnsmessage.RCodeNotImplemented,
	"NoQuestionType":   dnsmessage.RCodeFormatError,
	"HugeLabelCount":   dnsmessage.RCodeFormatError,
	"ReservedLabelBit": dnsmessage.RCodeFormatError,
}

func TestServe_Malformed(t *testing.T) {
	s := MustServe(t, testLookup)
	for name, pkt := range malformed {
		t.Run(name, func(t *testing.T) {
			if want, ok := wantRCode[name]; ok {
				m := MustExchange(t, s, "udp", pkt)
				if m.RCode != want || m.ID != 0x1234 || !m.Response {
					t.Fatalf("got rcode %v ID %#x, want %v 0x1234", m.RCode, m.ID, want)
				}
				return
			}
			if got := s.respond(context.Background(), pkt, maxUDPAnswer); got != nil {
				t.Fatalf("got answer %x, want the packet dropped", got)
			}
			c, err := net.Dial("udp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("Random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		c, err := net.Dial("udp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 1000 {
			pkt := make([]byte, rng.IntN(600))
			for i := range pkt {
				pkt[i] = byte(rng.Uint32())
			}
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("TCP", func(t *testing.T) {
		for _, stream := range [][]byte{
			{0},               // half a length
			{0, 0},            // an empty message
			{0, 100, 1, 2, 3}, // shorter than announced
			append([]byte{0, 12}, header(1)...),
		} {
			c, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(stream); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
	})

	// After all that, the server still answers, on both transports.
	for _, network := range []string{"udp", "tcp"} {
		m := MustExchange(t, s, network, MustQuery(t, "terdut-server.terdut.svc.cluster.local.", dnsmessage.TypeA))
		if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 1 {
			t.Fatalf("%s after malformed packets: got %v with %d answers, want success with 1", network, m.RCode, len(m.Answers))
		}
	}
}

func TestServe_TCPConnectionReused(t *testing.T) {
	s := MustServe(t, testLookup)
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(hangGuard)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"terdut-server.terdut.svc.cluster.local.", "kubernetes.default.svc.cluster.local.", "nothere.cluster.local."} {
		var m dnsmessage.Message
		if err := m.Unpack(MustExchangeStream(t, c, MustQuery(t, name, dnsmessage.TypeA))); err != nil {
			t.Fatal(err)
		}
		if m.Questions[0].Name.String() != name {
			t.Fatalf("got answer for %s, want %s", m.Questions[0].Name, name)
		}
	}
}

// FuzzRespond checks that no packet panics the server and that every answer
// parses and carries the query's ID.
func FuzzRespond(f *testing.F) {
	for _, pkt := range malformed {
		f.Add(pkt)
	}
	f.Add(MustQuery(f, "terdut-server.terdut.svc.cluster.local.", dnsmessage.TypeA))
	f.Add(MustQuery(f, "many.cluster.local.", dnsmessage.TypeA))
	s := &Server{domain: "cluster.local", lookup: testLookup}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		got := s.respond(context.Background(), pkt, maxUDPAnswer)
		if got == nil {
			return
		}
		if len(got) > maxUDPAnswer {
			t.Fatalf("got %d bytes, want at most %d", len(got), maxUDPAnswer)
		}
		var m dnsmessage.Message
		if err := m.Unpack(got); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		if m.ID != binary.BigEndian.Uint16(pkt) || !m.Response {
			t.Fatalf("got ID %#x response %v, want %#x true", m.ID, m.Response, binary.BigEndian.Uint16(pkt))
		}
	})
}
