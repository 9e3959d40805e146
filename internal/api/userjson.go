package api

import (
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The answer to GET /api/me is written by hand rather than by encoding/json: it is the
// answer to every API-key and session check a client makes, and encoding/json's reflection
// was the largest cost of the request in the server's own code (see bench/README.md). The
// bytes are encoding/json's, key for key and escape for escape; TestMeJSON_AsEncodingJSON
// and FuzzMeJSON hold it to that, so a client decodes the same answer as before.

// meBuffers recycles the buffers the answers are built in.
var meBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// writeMe writes GET /api/me's answer: what writeJSON(w, 200, meJSON{...}) writes.
func writeMe(w http.ResponseWriter, u userJSON, hasPassword bool) {
	bp := meBuffers.Get().(*[]byte)
	defer meBuffers.Put(bp)
	b, err := appendMe((*bp)[:0], u, hasPassword)
	if err != nil {
		// A time RFC 3339 cannot hold (a year outside 0–9999, an offset of 24 hours or
		// more), which encoding/json refuses too: let it answer as it always has.
		writeJSON(w, http.StatusOK, meJSON{User: u, HasPassword: hasPassword})
		return
	}
	setJSONHeaders(w)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= 4<<10 { // an outsized answer's buffer is left to the collector
		*bp = b
	}
}

// meJSON is GET /api/me's answer as encoding/json would write it.
type meJSON struct {
	User        userJSON `json:"user"`
	HasPassword bool     `json:"has_password"`
}

// appendMe appends {"user":…,"has_password":…} and a newline, as json.Encoder writes a meJSON.
func appendMe(b []byte, u userJSON, hasPassword bool) ([]byte, error) {
	b = append(b, `{"user":`...)
	b, err := appendUser(b, u)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"has_password":`...)
	b = strconv.AppendBool(b, hasPassword)
	return append(b, "}\n"...), nil
}

// appendUser appends u as json.Marshal writes a userJSON: GET /api/me's user, and each user of
// the list GET /api/users streams.
func appendUser(b []byte, u userJSON) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, u.ID, 10)
	b = append(b, `,"username":`...)
	b = appendJSONString(b, u.Username)
	b = append(b, `,"email":`...)
	b = appendJSONString(b, u.Email)
	b = append(b, `,"role":`...)
	b = appendJSONString(b, u.Role)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, u.Kind)
	b = append(b, `,"sso":`...)
	b = strconv.AppendBool(b, u.SSO)
	b = append(b, `,"created_at":"`...)
	// AppendText is what time.Time's MarshalJSON writes between its quotes: RFC 3339 with
	// the nanoseconds it has, and an error for a year outside 0–9999 or an offset of 24
	// hours or more.
	b, err := u.CreatedAt.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, `"}`...), nil
}

// appendJSONString appends s as a JSON string the way encoding/json does by default: <, >
// and & as \u003c, \u003e and \u0026, control characters as \n, \r, \t, \b, \f or \u00XX,
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte { return appendQuoted(b, s, true) }

// appendLogString appends s as log/slog's JSON handler writes a string: as appendJSONString
// does, but <, > and & as they are and \b and \f as \u0008 and \u000c.
func appendLogString(b []byte, s string) []byte { return appendQuoted(b, s, false) }

// plainHTML and plainLog say which bytes appendQuoted copies as they are, for
// appendJSONString and appendLogString: printable ASCII but for the quote, the backslash and,
// with html, <, > and &. One load a byte instead of six comparisons: the quoted strings are
// most of the bytes of /api/me's answer and of an access line.
var plainHTML, plainLog = plainBytes(true), plainBytes(false)

func plainBytes(html bool) (plain [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&')
	}
	return plain
}

func appendQuoted(b []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	plain := &plainLog
	if html {
		plain = &plainHTML
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\b' && html:
				b = append(b, '\\', 'b')
			case c == '\f' && html:
				b = append(b, '\\', 'f')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
