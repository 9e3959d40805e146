package opjwt_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// FuzzVerify: whatever the Bearer value, Verify neither panics nor accepts anything but a
// token the issuer signed for the operator, and a refusal never quotes the token. A token of a
// key the last read of the keys did not hold, within MinRefresh of it, is not refused but
// answered "not yet read" (the operator retries): that is no acceptance either.
func FuzzVerify(f *testing.F) {
	is := satest.New(f, satest.Options{})
	v := mustVerifierTB(f, is)
	good := is.Sign(f, operatorClaims())
	f.Add(good)
	f.Add(is.SignES256(f, operatorClaims()))
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := v.Verify(t.Context(), token)
		if err == nil {
			if id.Subject != subject || id.Pod != pod {
				t.Fatalf("accepted %q as %+v, want only the issuer's tokens for %s", token, id, subject)
			}
			return
		}
		var refused *opjwt.RefusedError
		if !errors.As(err, &refused) && !errors.Is(err, opjwt.ErrKeyNotYetRead) {
			t.Fatalf("got %v, want a refusal or a key not yet read (the issuer is up)", err)
		}
		if len(token) > 8 && strings.Contains(err.Error(), token) {
			t.Fatalf("the refusal %q quotes the token", err)
		}
	})
}

func mustVerifierTB(tb testing.TB, is *satest.Issuer) *opjwt.Verifier {
	tb.Helper()
	v, err := opjwt.New(opjwt.Config{Issuer: is.URL(), Audience: audience, Subjects: []string{subject}})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
