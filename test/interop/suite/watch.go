package suite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Watch sees a product's public traffic as it passes: how many UserInfo requests it
// answered, and the key ID in the header of the last ID token its token endpoint issued.
type Watch struct {
	userInfo atomic.Int64
	mu       sync.Mutex
	keyID    string
}

// Wrap returns h observed: requests to userInfoPath are counted, and the answers of
// tokenPath are read for their ID token.
func (w *Watch) Wrap(h http.Handler, tokenPath, userInfoPath string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case userInfoPath:
			w.userInfo.Add(1)
		case tokenPath:
			rec := &recorder{ResponseWriter: rw}
			h.ServeHTTP(rec, r)
			w.sawToken(rec.body.Bytes())
			return
		}
		h.ServeHTTP(rw, r)
	})
}

// UserInfoRequests returns how many UserInfo requests the product received.
func (w *Watch) UserInfoRequests() int64 { return w.userInfo.Load() }

// LastKeyID returns the kid of the last ID token the product issued, "" before any.
func (w *Watch) LastKeyID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keyID
}

func (w *Watch) sawToken(body []byte) {
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if json.Unmarshal(body, &tok) != nil || tok.IDToken == "" {
		return
	}
	header, _, _ := strings.Cut(tok.IDToken, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	var h struct {
		KeyID string `json:"kid"`
	}
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return
	}
	w.mu.Lock()
	w.keyID = h.KeyID
	w.mu.Unlock()
}

// recorder passes a response on and keeps a copy of its body.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}
