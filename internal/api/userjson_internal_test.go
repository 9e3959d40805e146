package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// encodingJSONMe is what writeJSON wrote for GET /api/me before the answer was written by
// hand, and what existing clients decode.
func encodingJSONMe(t testing.TB, u userJSON, hasPassword bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(meJSON{User: u, HasPassword: hasPassword}); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return buf.Bytes()
}

// checkMeJSON fails unless appendMe writes encoding/json's bytes for u.
func checkMeJSON(t testing.TB, u userJSON, hasPassword bool) {
	t.Helper()
	want := encodingJSONMe(t, u, hasPassword)
	got, err := appendMe(nil, u, hasPassword)
	if err != nil {
		t.Fatalf("appendMe(%+v): %v", u, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendMe(%+v):\n got %q\nwant %q", u, got, want)
	}
}

// TestMeJSON_AsEncodingJSON: the hand-written answer of GET /api/me is byte for byte what
// encoding/json writes, for every kind of character a username or address can hold and
// every shape of time, so no client sees a different answer.
func TestMeJSON_AsEncodingJSON(t *testing.T) {
	created := time.Date(2026, 12, 1, 2, 22, 38, 878686000, time.UTC)
	strs := []string{
		"", "ada", "terdut-operator-bootstrap", "ada@example.test",
		`quote" backslash\ slash/`, "<script>&amp;</script>", "tab\tnewline\nreturn\r",
		"\b\f\x00\x01\x1f\x7f", "José Ñandú 日本語 🙂", "line\u2028para\u2029",
		"bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate", "emoji at end 🙂",
	}
	for _, s := range strs {
		checkMeJSON(t, userJSON{ID: 42, Username: s, Email: s, Role: s, Kind: s, CreatedAt: created}, false)
	}
	for _, tm := range []time.Time{
		created,
		created.Truncate(time.Second),
		created.Truncate(time.Millisecond),
		time.Date(2026, 12, 1, 2, 22, 38, 100, time.UTC),
		created.In(time.FixedZone("", -(3*3600 + 30*60))),
		created.In(time.FixedZone("CET", 3600)),
		{},
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		checkMeJSON(t, userJSON{ID: 1, Username: "u", Role: "admin", Kind: "human", SSO: true, CreatedAt: tm}, true)
	}
	for _, id := range []int64{0, 1, -1, 1<<63 - 1, -1 << 63} {
		checkMeJSON(t, userJSON{ID: id, Username: "u", CreatedAt: created}, id%2 == 0)
	}
}

// TestWriteMe: the answer's status, headers and body are writeJSON's, and a time that RFC
// 3339 cannot hold still gets encoding/json's answer rather than a broken body.
func TestWriteMe(t *testing.T) {
	for _, u := range []userJSON{
		{ID: 7, Username: "ada", Email: "ada@example.test", Role: "admin", Kind: "human", SSO: true,
			CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 5, time.UTC)},
		{ID: 8, Username: "year-10000", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		want := httptest.NewRecorder()
		writeJSON(want, http.StatusOK, meJSON{User: u, HasPassword: true})
		got := httptest.NewRecorder()
		writeMe(got, u, true)
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Errorf("%s: writeMe answered %d %q, writeJSON %d %q", u.Username, got.Code, got.Body, want.Code, want.Body)
		}
		for _, h := range []string{"Content-Type", "X-Content-Type-Options"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("%s: %s %q, want %q", u.Username, h, got.Header().Get(h), want.Header().Get(h))
			}
		}
	}
}

// FuzzMeJSON compares the hand-written answer with encoding/json's for arbitrary names,
// addresses and times. `make fuzz` runs it; `make test` runs its seeds.
func FuzzMeJSON(f *testing.F) {
	f.Add(int64(1), "ada", "ada@example.test", "admin", "human", true, int64(1764555758878686000), int32(0), false)
	f.Add(int64(-5), "<&>\u2028", "\xff\xfe", "", "service", false, int64(0), int32(-12600), true)
	f.Fuzz(func(t *testing.T, id int64, username, email, role, kind string, sso bool, unixNano int64, offset int32, hasPassword bool) {
		u := userJSON{ID: id, Username: username, Email: email, Role: role, Kind: kind, SSO: sso,
			CreatedAt: time.Unix(0, unixNano).In(time.FixedZone("", int(offset%(18*3600))))}
		checkMeJSON(t, u, hasPassword)
	})
}

// TestSetJSONHeaders_SharedValues: answers share their JSON header values, so one that
// adds to its own headers must copy them, not write into what the others hold: the shared
// slices have no room to append into, an answer that adds gets values of its own, and
// concurrent answers adding at once show no race under -race, as make test runs.
func TestSetJSONHeaders_SharedValues(t *testing.T) {
	for name, v := range map[string][]string{"jsonContentType": jsonContentType, "noSniff": noSniff} {
		if cap(v) != len(v) {
			t.Fatalf("%s has room for %d more values: an Add would write into every answer's", name, cap(v)-len(v))
		}
	}
	one := httptest.NewRecorder()
	setJSONHeaders(one)
	one.Header().Add("Content-Type", "text/plain")
	if got := one.Header()["Content-Type"]; &got[0] == &jsonContentType[0] {
		t.Fatalf("after Add the answer's Content-Type values are still the shared ones")
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			w := httptest.NewRecorder()
			setJSONHeaders(w)
			w.Header().Add("Content-Type", fmt.Sprint("text/plain; answer=", i))
			w.Header().Add("X-Content-Type-Options", fmt.Sprint("answer-", i))
		})
	}
	wg.Wait()
	next := httptest.NewRecorder()
	setJSONHeaders(next)
	for h, want := range map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Content-Type-Options": "nosniff"} {
		if got := next.Header().Values(h); len(got) != 1 || got[0] != want {
			t.Errorf("%s after other answers added to theirs: got %q, want [%q]", h, got, want)
		}
	}
}
