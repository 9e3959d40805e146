package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeNotification decodes a webhook body into am exactly as json.Unmarshal does, in 40% of
// its time and a third of its allocations on the bodies Alertmanager sends
// (BenchmarkDecodeNotification). json.Unmarshal was a third of the server's CPU on a
// notification, and nearly 40% of it on a replayed one (bench/README.md).
//
// The fast path reads the shape Alertmanager writes (Go's encoding/json of its webhook
// message): an object of known fields, each once, of the types amNotification has, with
// anything else skipped. What it does not read the way json.Unmarshal does, it does not read
// at all: a null, a key that differs from a field's name only by case, a field given twice, a
// number that is not a plain integer, nesting deeper than maxSkipDepth, invalid UTF-8, or any
// syntax error send the whole body to json.Unmarshal, which then accepts or refuses it as
// always. FuzzDecodeNotification holds the two to the same answer for any input.
func decodeNotification(body []byte, am *amNotification) error {
	if (&notificationDecoder{b: body}).notification(am) {
		return nil
	}
	*am = amNotification{}
	return json.Unmarshal(body, am)
}

// maxSkipDepth bounds the nesting of a value the fast path skips (json.Unmarshal allows 10,000).
const maxSkipDepth = 64

// notificationDecoder reads a body from b[i:]. Each method returns false for what the fast
// path does not read; the caller then gives up.
type notificationDecoder struct {
	b       []byte
	i       int
	seen    map[string]string // shared's strings
	scratch []byte            // the value of the last string read with an escape
}

// notification reads the whole body: one object, then only whitespace.
func (d *notificationDecoder) notification(am *amNotification) bool {
	var seen uint8
	ok := d.object(func(key string) bool {
		f, ok := notificationField(key)
		switch {
		case !ok:
			return d.unknown(key, notificationFields)
		case seen&(1<<f) != 0:
			return false
		}
		seen |= 1 << f
		switch f {
		case 0:
			return d.str(&am.Version)
		case 1:
			return d.str(&am.GroupKey)
		case 2:
			return d.integer(&am.TruncatedAlerts)
		case 3:
			return d.str(&am.Status)
		case 4:
			return d.labels(&am.GroupLabels)
		case 5:
			return d.labels(&am.CommonLabels)
		}
		return d.alerts(&am.Alerts)
	})
	d.space()
	return ok && d.i == len(d.b)
}

var (
	notificationFields = []string{"version", "groupKey", "truncatedAlerts", "status", "groupLabels", "commonLabels", "alerts"}
	alertFields        = []string{"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
)

func notificationField(key string) (int, bool) {
	for f, name := range notificationFields {
		if key == name {
			return f, true
		}
	}
	return 0, false
}

// unknown skips the value of a key that names no field, unless json.Unmarshal would take it
// for one: it matches a field's name regardless of case (bytes.EqualFold, as encoding/json).
func (d *notificationDecoder) unknown(key string, fields []string) bool {
	for _, name := range fields {
		if bytes.EqualFold([]byte(key), []byte(name)) {
			return false
		}
	}
	return d.skip(0)
}

func (d *notificationDecoder) alerts(out *[]amAlert) bool {
	if !d.consume('[') {
		return false
	}
	alerts := []amAlert{}
	if d.consume(']') {
		*out = alerts
		return true
	}
	for {
		alerts = append(alerts, amAlert{})
		if !d.alert(&alerts[len(alerts)-1]) {
			return false
		}
		if d.consume(',') {
			continue
		}
		*out = alerts
		return d.consume(']')
	}
}

func (d *notificationDecoder) alert(a *amAlert) bool {
	var seen uint8
	return d.object(func(key string) bool {
		f := -1
		for k, name := range alertFields {
			if key == name {
				f = k
			}
		}
		switch {
		case f < 0:
			return d.unknown(key, alertFields)
		case seen&(1<<f) != 0:
			return false
		}
		seen |= 1 << f
		switch f {
		case 0:
			return d.str(&a.Status)
		case 1:
			return d.labels(&a.Labels)
		case 2:
			return d.labels(&a.Annotations)
		case 3:
			return d.time(&a.StartsAt)
		case 4:
			return d.time(&a.EndsAt)
		case 5:
			return d.str(&a.GeneratorURL)
		}
		return d.str(&a.Fingerprint)
	})
}

// object reads an object, calling member with each key (unescaped) with d at its value.
func (d *notificationDecoder) object(member func(key string) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		key, ok := d.shared()
		if !ok || !d.consume(':') || !member(key) {
			return false
		}
		if !d.consume(',') {
			return d.consume('}')
		}
	}
}

// labels reads an object of strings into a new map (a key given twice: the last value, as
// json.Unmarshal sets it).
func (d *notificationDecoder) labels(out *map[string]string) bool {
	m := map[string]string{}
	ok := d.object(func(key string) bool {
		v, ok := d.shared()
		m[key] = v
		return ok
	})
	*out = m
	return ok
}

func (d *notificationDecoder) str(out *string) bool {
	s, ok := d.string()
	*out = s
	return ok
}

// integer reads a number written as an integer that fits an int (json.Unmarshal refuses a
// fraction or an exponent for an int; the fast path leaves both, and overflow, to it).
func (d *notificationDecoder) integer(out *int) bool {
	d.space()
	start := d.i
	if !d.number() {
		return false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, strconv.IntSize)
	*out = int(n)
	return err == nil
}

// time reads a string with time.Time's UnmarshalJSON, given the literal as written, as
// json.Unmarshal gives it.
func (d *notificationDecoder) time(out interface{ UnmarshalJSON([]byte) error }) bool {
	d.space()
	start := d.i
	if _, ok := d.literalString(); !ok {
		return false
	}
	return out.UnmarshalJSON(d.b[start:d.i]) == nil
}

// string reads a string literal and returns its value (a new string).
func (d *notificationDecoder) string() (string, bool) {
	b, ok := d.literalString()
	return string(b), ok
}

// shared reads a string literal, as string does, and returns the same string for the same
// value: label names and the commonest values repeat in every alert of a group, so each is
// allocated once a body. Up to maxShared short values are kept.
func (d *notificationDecoder) shared() (string, bool) {
	b, ok := d.literalString()
	if !ok || len(b) > maxSharedBytes {
		return string(b), ok
	}
	if s, found := d.seen[string(b)]; found {
		return s, true
	}
	s := string(b)
	if len(d.seen) < maxShared {
		if d.seen == nil {
			d.seen = make(map[string]string, 32)
		}
		d.seen[s] = s
	}
	return s, true
}

// The bounds of what shared keeps.
const (
	maxShared      = 256
	maxSharedBytes = 64
)

// literalString reads a string literal and returns its value, its escapes decoded as
// encoding/json decodes them (an unpaired surrogate is U+FFFD): a part of the body when it has
// no escape, until the decoder reads on. Invalid UTF-8, which json.Unmarshal replaces, is left
// to it.
func (d *notificationDecoder) literalString() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start, ascii := d.i, true
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			if !ascii && !utf8.Valid(d.b[start:j]) {
				return nil, false
			}
			return d.b[start:j], true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// escaped reads the rest of a string literal that began at b[start] and holds an escape.
func (d *notificationDecoder) escaped(start int) ([]byte, bool) {
	out := d.scratch[:0]
	defer func() { d.scratch = out }()
	for j := start; j < len(d.b); {
		k := j
		for k < len(d.b) && d.b[k] != '"' && d.b[k] != '\\' && d.b[k] >= 0x20 {
			k++
		}
		out = append(out, d.b[j:k]...)
		if j = k; j >= len(d.b) || d.b[j] < 0x20 {
			return nil, false
		}
		if d.b[j] == '"' {
			d.i = j + 1
			return out, utf8.Valid(out)
		}
		if j+1 >= len(d.b) {
			return nil, false
		}
		switch e := d.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(d.b[j:])
			if r < 0 {
				return nil, false
			}
			j += 6
			if utf16.IsSurrogate(r) {
				if pair := utf16.DecodeRune(r, hex4(d.b[j:])); pair != utf8.RuneError {
					out = utf8.AppendRune(out, pair)
					j += 6
					continue
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, false
		}
		j += 2
	}
	return nil, false
}

// hex4 is the rune of a \uXXXX escape at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number reads an integer literal: -?(0|[1-9][0-9]*), not followed by a fraction or exponent.
func (d *notificationDecoder) number() bool {
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && '0' <= d.b[j] && d.b[j] <= '9' {
		j++
	}
	if j == digits || d.b[digits] == '0' && j > digits+1 {
		return false
	}
	if j < len(d.b) && (d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return false
	}
	d.i = j
	return true
}

// skip reads any value the fast path does not keep: a string, an integer, true or false, and
// arrays and objects of those, at most maxSkipDepth deep.
func (d *notificationDecoder) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch d.peek() {
	case '"':
		_, ok := d.literalString()
		return ok
	case '{':
		return d.object(func(string) bool { return d.skip(depth + 1) })
	case '[':
		d.i++
		if d.consume(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			if !d.consume(',') {
				return d.consume(']')
			}
		}
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	}
	return d.number()
}

func (d *notificationDecoder) literal(word string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(word)) {
		return false
	}
	d.i += len(word)
	return true
}

func (d *notificationDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after whitespace, or 0 at the end.
func (d *notificationDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// consume reads c after whitespace.
func (d *notificationDecoder) consume(c byte) bool {
	if d.peek() != c {
		return false
	}
	d.i++
	return true
}
