package api_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

type apiKeyBody struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"user_id"`
	Name       string     `json:"name"`
	Key        string     `json:"key"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

var apiKeyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// mustCreateKey creates a key for the user with the given credentials and returns it, secret included.
func mustCreateKey(t *testing.T, e coreEnv, userID int64, key, name string) apiKeyBody {
	t.Helper()
	resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: userURL(userID, "/api-keys"), Bearer: key,
		Body: map[string]string{"name": name}})
	wantStatus(t, resp, http.StatusCreated)
	var k apiKeyBody
	resp.JSON(t, &k)
	return k
}

// listKeys lists the user's keys with the given credentials, returning the raw response too.
func listKeys(t *testing.T, e coreEnv, userID int64, key string) ([]apiKeyBody, apitest.Response) {
	t.Helper()
	resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: userURL(userID, "/api-keys"), Bearer: key})
	wantStatus(t, resp, http.StatusOK)
	var body []apiKeyBody
	resp.JSON(t, &body)
	return body, resp
}

// whoAmI returns the id of the user the key authenticates, or 0 with the status when it does not.
func whoAmI(t *testing.T, e coreEnv, key string) (int64, int) {
	t.Helper()
	resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key})
	if resp.Status != http.StatusOK {
		return 0, resp.Status
	}
	var body struct{ User struct{ ID int64 } }
	resp.JSON(t, &body)
	return body.User.ID, resp.Status
}

func TestAPIKeys_Create(t *testing.T) {
	e := newCoreEnv(t, nil)

	t.Run("OK", func(t *testing.T) {
		resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: userURL(e.alice.User.ID, "/api-keys"),
			Bearer: e.alice.APIKey, Body: map[string]string{"name": "  laptop  "}})
		wantStatus(t, resp, http.StatusCreated)
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Fatalf("Cache-Control: got %q, want no-store (the key is in the body)", cc)
		}
		var k apiKeyBody
		resp.JSON(t, &k)
		if k.ID == 0 || k.UserID != e.alice.User.ID || k.Name != "laptop" || k.CreatedAt.IsZero() || k.LastUsedAt != nil ||
			!apiKeyPattern.MatchString(k.Key) {
			t.Fatalf("got %s, want alice's new unused key laptop with a 64-hex secret", resp.Body)
		}
		if id, status := whoAmI(t, e, k.Key); id != e.alice.User.ID {
			t.Fatalf("the new key: got user %d (status %d), want %d", id, status, e.alice.User.ID)
		}

		// Stored as a SHA-256 hash, never the key itself.
		var hash []byte
		if err := e.srv.Store.Pool().QueryRow(context.Background(), `SELECT key_hash FROM api_keys WHERE id = $1`, k.ID).
			Scan(&hash); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(k.Key))
		if len(hash) != sha256.Size || string(hash) != string(sum[:]) {
			t.Fatalf("key_hash: got %x (%d bytes), want the 32-byte SHA-256 of the key", hash, len(hash))
		}
		if n := count(t, e.srv, `SELECT count(*) FROM api_keys k
			WHERE strpos(k::text, $1) > 0 OR strpos(encode(k.key_hash, 'escape'), $1) > 0`, k.Key); n != 0 {
			t.Fatalf("rows holding the key in clear: got %d, want 0", n)
		}
		if strings.Contains(e.srv.Logs.String(), k.Key) {
			t.Fatalf("the key appears in the server's logs")
		}
	})

	t.Run("Admin", func(t *testing.T) {
		for _, key := range []string{e.admin.APIKey, e.principalKey} {
			k := mustCreateKey(t, e, e.bob.User.ID, key, "from-admin")
			if id, _ := whoAmI(t, e, k.Key); id != e.bob.User.ID || k.UserID != e.bob.User.ID {
				t.Fatalf("key created by an admin for bob: got user %d (user_id %d), want %d", id, k.UserID, e.bob.User.ID)
			}
		}
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		before := count(t, e.srv, `SELECT count(*) FROM api_keys`)
		for _, id := range []int64{e.bob.User.ID, e.admin.User.ID, e.principalID, 424242} {
			resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: userURL(id, "/api-keys"),
				Bearer: e.alice.APIKey, Body: map[string]string{"name": "stolen"}})
			wantAPIError(t, resp, http.StatusForbidden, "forbidden")
		}
		if after := count(t, e.srv, `SELECT count(*) FROM api_keys`); after != before {
			t.Fatalf("keys: got %d, want %d", after, before)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: userURL(424242, "/api-keys"),
			Bearer: e.admin.APIKey, Body: map[string]string{"name": "x"}})
		wantAPIError(t, resp, http.StatusNotFound, "not_found")
	})

	t.Run("ErrInvalidName", func(t *testing.T) {
		for name, keyName := range map[string]string{
			"Empty":   "",
			"Blank":   "   ",
			"Control": "ci\x00",
			"Newline": "ci\nadmin",
			"TooLong": strings.Repeat("k", 101),
		} {
			resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: userURL(e.alice.User.ID, "/api-keys"),
				Bearer: e.alice.APIKey, Body: map[string]string{"name": keyName}})
			if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_name" {
				t.Errorf("%s: got %d %s, want 400 invalid_name", name, resp.Status, resp.Body)
			}
		}
	})
}

func TestAPIKeys_List(t *testing.T) {
	e := newCoreEnv(t, nil)
	created := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "ci")

	t.Run("OK", func(t *testing.T) {
		keys, resp := listKeys(t, e, e.alice.User.ID, e.alice.APIKey)
		if len(keys) != 2 || keys[1].ID != created.ID || keys[1].Name != "ci" || !keys[1].CreatedAt.Equal(created.CreatedAt) {
			t.Fatalf("got %s, want alice's two keys, the second %d ci", resp.Body, created.ID)
		}
		// The secret is shown once, at creation: the list never carries it.
		if strings.Contains(string(resp.Body), created.Key) || strings.Contains(string(resp.Body), e.alice.APIKey) ||
			strings.Contains(string(resp.Body), `"key"`) {
			t.Fatalf("list: got %s, want no secrets and no key field", resp.Body)
		}
		// Admins see anyone's keys, without their secrets either.
		keys, resp = listKeys(t, e, e.alice.User.ID, e.admin.APIKey)
		if len(keys) != 2 || strings.Contains(string(resp.Body), created.Key) {
			t.Fatalf("list by an admin: got %s, want two keys without secrets", resp.Body)
		}
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		for _, id := range []int64{e.bob.User.ID, e.principalID} {
			resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: userURL(id, "/api-keys"), Bearer: e.alice.APIKey})
			wantAPIError(t, resp, http.StatusForbidden, "forbidden")
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: userURL(424242, "/api-keys"), Bearer: e.admin.APIKey})
		wantAPIError(t, resp, http.StatusNotFound, "not_found")
	})
}

func TestAPIKeys_Delete(t *testing.T) {
	e := newCoreEnv(t, nil)
	del := func(t *testing.T, key string, userID, keyID int64) apitest.Response {
		t.Helper()
		return e.do(t, apitest.Request{Method: http.MethodDelete, Bearer: key,
			Path: userURL(userID, "/api-keys/"+strconv.FormatInt(keyID, 10))})
	}

	t.Run("OK", func(t *testing.T) {
		k := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "short-lived")
		wantStatus(t, del(t, e.alice.APIKey, e.alice.User.ID, k.ID), http.StatusNoContent)
		if _, status := whoAmI(t, e, k.Key); status != http.StatusUnauthorized {
			t.Fatalf("revoked key: got %d, want 401", status)
		}
		keys, _ := listKeys(t, e, e.alice.User.ID, e.alice.APIKey)
		for _, got := range keys {
			if got.ID == k.ID {
				t.Fatalf("revoked key %d is still listed", k.ID)
			}
		}
		wantAPIError(t, del(t, e.alice.APIKey, e.alice.User.ID, k.ID), http.StatusNotFound, "not_found")
	})

	t.Run("Admin", func(t *testing.T) {
		k := mustCreateKey(t, e, e.bob.User.ID, e.bob.APIKey, "revoked-by-admin")
		wantStatus(t, del(t, e.admin.APIKey, e.bob.User.ID, k.ID), http.StatusNoContent)
		if _, status := whoAmI(t, e, k.Key); status != http.StatusUnauthorized {
			t.Fatalf("key revoked by an admin: got %d, want 401", status)
		}
	})

	t.Run("RevokingTheKeyInUse", func(t *testing.T) {
		k := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "self")
		wantStatus(t, del(t, k.Key, e.alice.User.ID, k.ID), http.StatusNoContent)
		if _, status := whoAmI(t, e, k.Key); status != http.StatusUnauthorized {
			t.Fatalf("key that revoked itself: got %d, want 401", status)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		bobs := mustCreateKey(t, e, e.bob.User.ID, e.bob.APIKey, "bobs")
		// Another user's key id under your own path, and an id that never existed.
		wantAPIError(t, del(t, e.alice.APIKey, e.alice.User.ID, bobs.ID), http.StatusNotFound, "not_found")
		wantAPIError(t, del(t, e.alice.APIKey, e.alice.User.ID, 424242), http.StatusNotFound, "not_found")
		// Even an admin must name the key under its owner.
		wantAPIError(t, del(t, e.admin.APIKey, e.admin.User.ID, bobs.ID), http.StatusNotFound, "not_found")
		if id, _ := whoAmI(t, e, bobs.Key); id != e.bob.User.ID {
			t.Fatalf("bob's key after others tried to revoke it: got user %d, want %d", id, e.bob.User.ID)
		}
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		bobs := mustCreateKey(t, e, e.bob.User.ID, e.bob.APIKey, "bobs-too")
		wantAPIError(t, del(t, e.alice.APIKey, e.bob.User.ID, bobs.ID), http.StatusForbidden, "forbidden")
		if id, _ := whoAmI(t, e, bobs.Key); id != e.bob.User.ID {
			t.Fatalf("bob's key after alice tried to revoke it: got user %d, want %d", id, e.bob.User.ID)
		}
	})
}

func TestAPIKeys_LastUsed(t *testing.T) {
	e := newCoreEnv(t, nil)
	k := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "watched")
	lastUsed := func(t *testing.T) *time.Time {
		t.Helper()
		// Listed with another credential, so that listing does not use the key itself.
		keys, resp := listKeys(t, e, e.alice.User.ID, e.admin.APIKey)
		for _, got := range keys {
			if got.ID == k.ID {
				return got.LastUsedAt
			}
		}
		t.Fatalf("key %d not listed: %s", k.ID, resp.Body)
		return nil
	}

	if got := lastUsed(t); got != nil {
		t.Fatalf("before any use: got %v, want null", got)
	}
	before := time.Now().Add(-time.Minute)
	if id, status := whoAmI(t, e, k.Key); id != e.alice.User.ID {
		t.Fatalf("use the key: got user %d (status %d), want %d", id, status, e.alice.User.ID)
	}
	first := lastUsed(t)
	if first == nil || first.Before(before) || first.After(time.Now().Add(time.Minute)) {
		t.Fatalf("after the first use: got %v, want about now", first)
	}
	// Past the resolution window, a use moves it on.
	if _, err := e.srv.Store.Pool().Exec(context.Background(),
		`UPDATE api_keys SET last_used_at = now() - interval '1 day' WHERE id = $1`, k.ID); err != nil {
		t.Fatal(err)
	}
	whoAmI(t, e, k.Key)
	if got := lastUsed(t); got == nil || got.Before(before) {
		t.Fatalf("after a use a day later: got %v, want about now", got)
	}
}
