package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// TestPasswordSet_Policy: the password rules answer over the API as JSON errors with their
// codes and say what the rule is; a passphrase of 12 characters that takes more bytes than
// characters is accepted, and signs in.
func TestPasswordSet_Policy(t *testing.T) {
	srv := newServer(t)
	key := srv.MustClaim(t)
	var ada struct{ ID int64 }
	srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key,
		Body: map[string]string{"username": "ada", "email": "ada@example.test"}}).JSON(t, &ada)
	set := func(pw string) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPut, Bearer: key,
			Path: "/api/users/" + strconv.FormatInt(ada.ID, 10) + "/password", Body: map[string]string{"password": pw}})
	}
	for _, tc := range []struct{ pw, code, says string }{
		{"short-pass1", "invalid_password", "at least 12 characters"},
		{strings.Repeat("ü", 37), "invalid_password", "at most 72 bytes"}, // 37 characters, 74 bytes
		{"qwerty123456", "password_too_common", "commonest passwords"},
		{"Trustno1!!!!", "password_too_common", "commonest passwords"},
	} {
		resp := set(tc.pw)
		wantAPIError(t, resp, http.StatusBadRequest, tc.code)
		var body struct{ Error string }
		resp.JSON(t, &body)
		if !strings.Contains(body.Error, tc.says) {
			t.Errorf("password %q: got error %q, want it to say %q", tc.pw, body.Error, tc.says)
		}
	}
	if u, err := srv.Store.User(t.Context(), ada.ID); err != nil || u.HasPassword {
		t.Fatalf("after refusals: got has_password %v, %v, want false", u.HasPassword, err)
	}
	const passphrase = "Ключ под ковриком" // 17 characters, 32 bytes
	wantStatus(t, set(passphrase), http.StatusNoContent)
	wantStatus(t, login(t, srv, "ada", passphrase, nil), http.StatusOK)
}
