package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/terdut-server/terdut-server/internal/store"
)

// nameTagger names what someone typed as a username in a failed sign-in's log line without
// writing it: that text is often a password typed into the wrong field. The tag is an HMAC
// under a key this process draws at start, so the same name gives the same tag (a run of
// guesses at one name reads together in this replica's log), while a log that leaks lets
// nobody test guesses against it offline, as a plain or salted-in-the-open hash of a weak
// password would.
type nameTagger struct{ key []byte }

func newNameTagger() nameTagger {
	return nameTagger{key: []byte(rand.Text())}
}

// signInName is the attribute that names the subject of a refused password sign-in: the
// person (target: id and stored name) when u is one, else username_tag, 12 hex characters
// of the keyed hash of the lower-cased name as typed.
func (t nameTagger) signInName(u store.User, typed string) slog.Attr {
	if u.ID != 0 {
		return target(u)
	}
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(strings.ToLower(typed)))
	return slog.String("username_tag", hex.EncodeToString(m.Sum(nil)[:6]))
}
