package api

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terdut-server/terdut-server/internal/logbuf"
	"github.com/terdut-server/terdut-server/internal/logcap"
)

// accessLog writes the request's access line to w: method, route pattern (never the raw path,
// which can hold anything a client typed), status, duration, the principal's id (0: none) and
// the request's ids (the server's, and the client's X-Request-Id beside it when sent). The
// line is the one slog's JSON handler writes for log.Info("request", those attributes), byte
// for byte (TestAccessLine_AsSlog), built by hand: through slog it cost about 4 µs and two
// allocations of every request (its attributes, the float's encoding/json), and a write
// system call (see bench/README.md). The server's log (internal/logbuf) holds the line where
// it is built, in the buffer of the processor it waits in; any other writer (a test's, an
// embedder's) is given it whole in one Write, from a buffer made for it. The method is the
// client's word (Go's server takes any token that fits in its 64 KiB of headers), so it is
// cut like every caller value in a line.
func accessLog(w accessWriter, method, route string, c *requestContext, now time.Time, took time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	method = logcap.String(method)
	line := func(b []byte) []byte {
		return appendAccessLine(b, now, method, route, c.w.status, took, c.p.User.ID, c.id[0], c.clientID)
	}
	if w.held != nil {
		_ = w.held.AppendLine(line)
		return
	}
	_, _ = w.w.Write(line(make([]byte, 0, 256)))
}

// accessWriter is where access lines go: w, and held when w is the server's log, whose lines
// are built in place.
type accessWriter struct {
	w    io.Writer
	held *logbuf.Held
}

func newAccessWriter(w io.Writer) accessWriter {
	if held, ok := w.(logbuf.Held); ok {
		return accessWriter{w: w, held: &held}
	}
	return accessWriter{w: w}
}

// appendAccessLine appends the access line as slog.JSONHandler writes it: time (RFC 3339 with
// nanoseconds, as slog writes a record's time), level, msg, then the attributes, and a newline.
func appendAccessLine(b []byte, now time.Time, method, route string, status int, took time.Duration, userID int64, id, clientID string) []byte {
	b = append(b, `{"time":"`...)
	b = appendLogTime(b, now)
	b = append(b, `","level":"INFO","msg":"request","method":`...)
	b = appendLogString(b, method)
	b = append(b, `,"route":`...)
	b = appendLogString(b, route)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"duration_ms":`...)
	b = appendMilliseconds(b, took)
	b = append(b, `,"user_id":`...)
	b = strconv.AppendInt(b, userID, 10)
	b = append(b, `,"request_id":`...)
	b = appendLogString(b, id)
	if clientID != "" {
		b = append(b, `,"client_request_id":`...)
		b = appendLogString(b, clientID)
	}
	return append(b, "}\n"...)
}

// logSecond is the text of one second of access-line times as RFC 3339 writes them: the date
// and time before the second's fraction, and the zone after it.
type logSecond struct {
	unix       int64
	loc        *time.Location
	date, zone []byte
}

// lastSecond is the second of the last access line's time: lines come many a second.
var lastSecond atomic.Pointer[logSecond]

// appendLogTime appends t as t.AppendFormat(b, time.RFC3339Nano) does (TestLogTime_AsFormat):
// the text of its second, kept from the last line's, and its fraction. Formatting the whole
// time was about a fifth of a line's cost.
func appendLogTime(b []byte, t time.Time) []byte {
	s := lastSecond.Load()
	if s == nil || s.unix != t.Unix() || s.loc != t.Location() {
		s = &logSecond{unix: t.Unix(), loc: t.Location(),
			date: t.AppendFormat(nil, "2006-01-02T15:04:05"), zone: t.AppendFormat(nil, "Z07:00")}
		lastSecond.Store(s)
	}
	b = append(b, s.date...)
	if ns := t.Nanosecond(); ns != 0 { // nine digits, without the zeros that end them
		frac := [10]byte{'.'}
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(frac)
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	return append(b, s.zone...)
}

// appendMilliseconds appends took in milliseconds to the microsecond, as encoding/json (which
// slog uses for floats) writes float64(took.Microseconds())/1000: the shortest decimal that
// reads back as that float is the quotient itself (at most 15 significant digits, 31 years),
// written with integers, at a quarter of strconv's float formatting's cost.
func appendMilliseconds(b []byte, took time.Duration) []byte {
	us := took.Microseconds()
	if us < 0 || us >= 1e15 {
		return strconv.AppendFloat(b, float64(us)/1000, 'f', -1, 64)
	}
	b = strconv.AppendInt(b, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return b
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// maxRequestIDBytes bounds an X-Request-Id taken from a client.
const maxRequestIDBytes = 64

// requestIDGen names requests: this replica's random prefix and a number no other request of
// the replica has had. The numbers come from one counter a block at a time, and each
// processor hands out those of its own block (a sync.Pool keeps one a processor): a counter
// every request added to went from core to core, which on a busy 2-core machine cost about
// 1 µs of CPU a request in the process and as much in Postgres, waiting on it (issue 23).
// A block keeps the prefix's text, so that an id is made in it without copying the prefix.
// Numbers are unique but not in order across processors, and a block the pool drops at a
// garbage collection leaves a gap. A client's X-Request-Id never takes the id's place
// (clientRequestID keeps it beside).
type requestIDGen struct {
	prefix string
	n      atomic.Uint64 // the last number given to a block
	blocks sync.Pool     // of *idBlock
}

// idBlock is a run of numbers, those after next up to end, and the text of the last id
// given: the prefix, then the number.
type idBlock struct {
	next, end uint64
	text      []byte
	prefix    int // the prefix's length in text
}

// idBlockSize is how many numbers a block takes from the counter at once.
const idBlockSize = 1024

func newRequestIDs() *requestIDGen {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &requestIDGen{prefix: hex.EncodeToString(b) + "-"}
}

func (ids *requestIDGen) next() string {
	blk, _ := ids.blocks.Get().(*idBlock)
	if blk == nil {
		// 13: the base-36 digits of the largest uint64.
		text := append(make([]byte, 0, len(ids.prefix)+13), ids.prefix...)
		blk = &idBlock{text: text, prefix: len(ids.prefix)}
	}
	if blk.next == blk.end {
		blk.end = ids.n.Add(idBlockSize)
		blk.next = blk.end - idBlockSize
	}
	blk.next++
	blk.text = strconv.AppendUint(blk.text[:blk.prefix], blk.next, 36)
	id := string(blk.text)
	ids.blocks.Put(blk)
	return id
}

// clientRequestID is the client's X-Request-Id when it sent one plain token of at most
// maxRequestIDBytes, else "".
func clientRequestID(r *http.Request) string {
	if v := r.Header["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return v[0]
	}
	return ""
}

// validRequestID admits 1 to maxRequestIDBytes letters, digits and . _ : - + / =, what
// request ids made by proxies and clients (UUIDs, base64) are written in.
func validRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return true
}
