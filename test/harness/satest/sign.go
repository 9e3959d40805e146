package satest

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// SignWith signs payload as a compact JWT with alg, key and the header kid: for tokens the
// issuer would never mint (a key it does not publish, HS256 with a public key as secret).
func SignWith(tb testing.TB, alg jose.SignatureAlgorithm, key any, kid string, payload map[string]any) string {
	tb.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := signer.Sign(body)
	if err != nil {
		tb.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return token
}

// Unsigned returns payload as a JWT with "alg": "none" and an empty signature.
func Unsigned(tb testing.TB, kid string, payload map[string]any) string {
	tb.Helper()
	header, err := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	if err != nil {
		tb.Fatal(err)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		tb.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(header) + "." + enc(body) + "."
}
