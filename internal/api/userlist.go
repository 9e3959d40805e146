package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/store"
)

// GET /api/users answers a bare JSON array of users, oldest first: existing clients decode it
// as []User, at any size of the table (see docs/api.md). Admins see each user whole; members
// see the roster (rosterJSON), to pick whom to assign an incident to.
//
//   - With limit or after in the query, it answers one page: at most limit users (1 to
//     maxUserPage, default defaultUserPage) whose id is above after, and, when more follow, a
//     Link header (RFC 8288) to the next page: </api/users?limit=L&after=ID>; rel="next".
//   - Without either, it streams the whole list, read userListBatch users at a time in order
//     of id, each batch one short statement: the server holds neither the list in memory nor a
//     database connection while the client reads. Each user who exists from the start of the
//     answer to its end is in it exactly once; one created or deleted meanwhile may or may not be.
//     An error after the first byte aborts the connection, so that the client reads a
//     truncated answer (not valid JSON, and for HTTP/1.1 a chunked body without its last
//     chunk), never a shorter list it would take for the whole one.
const (
	defaultUserPage = 100
	maxUserPage     = 1000
	userListBatch   = 1000
	// userListWriteWindow is how long the client may take to read one batch: the server's
	// write timeout bounds a whole answer, and a list of a million people takes longer than
	// that to read, so each batch gets its own deadline.
	userListWriteWindow = time.Minute
)

func (s *server) handleUserList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if !q.Has("limit") && !q.Has("after") {
			s.streamUsers(w, r)
			return
		}
		after, limit, err := parseUserPage(q)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// One more than the page tells whether a next page exists.
		users, err := s.store.UsersAfter(r.Context(), after, limit+1)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		more := len(users) > limit
		if more {
			users = users[:limit]
		}
		body := []byte{'['}
		for i, u := range users {
			if i > 0 {
				body = append(body, ',')
			}
			var err error
			if body, err = s.appendListed(r, body, u); err != nil {
				s.writeError(w, r, fmt.Errorf("encode user %d: %w", u.ID, err))
				return
			}
		}
		body = append(body, "]\n"...)
		if more {
			w.Header().Set("Link", fmt.Sprintf(`</api/users?limit=%d&after=%d>; rel="next"`, limit, users[len(users)-1].ID))
		}
		setJSONHeaders(w)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
	})
}

// parseUserPage reads the paging parameters of GET /api/users: each, when present, must be
// a whole number in its range (an empty one is not).
func parseUserPage(q url.Values) (int64, int, error) {
	var a int64
	if q.Has("after") {
		n, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || n < 0 {
			return 0, 0, errBadRequest("invalid_query",
				"after must be the id of the last user of the page before (a whole number, 0 for the first page).")
		}
		a = n
	}
	l := defaultUserPage
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > maxUserPage {
			return 0, 0, errBadRequest("invalid_query", fmt.Sprintf("limit must be a whole number from 1 to %d.", maxUserPage))
		}
		l = n
	}
	return a, l, nil
}

// userBatch is one batch of the streamed list, or why it could not be read.
type userBatch struct {
	users []store.User
	err   error
}

// readUsers starts reading the batch after the user with id after, and returns where it will
// arrive. Its statement returns its connection to the pool as soon as it ends.
func (s *server) readUsers(ctx context.Context, after int64) <-chan userBatch {
	ch := make(chan userBatch, 1)
	go func() {
		users, err := s.store.UsersAfter(ctx, after, userListBatch)
		ch <- userBatch{users, err}
	}()
	return ch
}

// streamUsers writes every user as one JSON array, a batch at a time (see handleUserList).
// The bytes are what encoding/json writes for the whole list. The next batch is read while
// the last is written, so that the database's round trip does not add to each batch's time;
// at most two batches are held, and no connection while the client reads.
func (s *server) streamUsers(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 32<<10)
	started := false
	next := s.readUsers(r.Context(), 0)
	var b []byte
	for {
		batch := <-next
		users, err := batch.users, batch.err
		last := err == nil && len(users) < userListBatch
		if err == nil && !last {
			next = s.readUsers(r.Context(), users[len(users)-1].ID)
		}
		b = b[:0]
		for i := 0; err == nil && i < len(users); i++ {
			b = append(b, ',')
			if b, err = s.appendListed(r, b, users[i]); err != nil {
				err = fmt.Errorf("encode user %d: %w", users[i].ID, err)
			}
		}
		if err != nil {
			if !started {
				s.writeError(w, r, err)
				return
			}
			s.abortList(r, err)
		}
		if !started {
			setJSONHeaders(w)
			w.WriteHeader(http.StatusOK)
			started = true
			if len(b) > 0 {
				b[0] = '['
			} else {
				b = append(b, '[')
			}
		}
		if last {
			b = append(b, "]\n"...)
		}
		// An unsupported deadline leaves the server's write timeout in force: nothing to do.
		_ = rc.SetWriteDeadline(time.Now().Add(userListWriteWindow))
		_, err = bw.Write(b)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			// The client went away or reads too slowly for the window: nobody reads the rest.
			s.log.InfoContext(r.Context(), "user list: the client stopped reading", "request_id", requestID(r.Context()), "err", err)
			panic(http.ErrAbortHandler)
		}
		if last {
			return
		}
	}
}

// abortList ends a user list whose answer has begun and cannot be finished: it logs why and
// aborts the connection (http.ErrAbortHandler), so that the client sees a truncated answer,
// not a complete-looking shorter list.
func (s *server) abortList(r *http.Request, err error) {
	if s.classify(err).Status != statusClientClosed {
		s.log.ErrorContext(r.Context(), "user list aborted after its answer began", "path", logcap.String(r.URL.Path),
			"request_id", requestID(r.Context()), "err", err)
	}
	panic(http.ErrAbortHandler)
}

// rosterJSON is a person as a member's GET /api/users shows them: whom they can assign an
// incident to, and nothing of anyone's role, kind or sign-in.
type rosterJSON struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

// appendListed appends u as the list shows it to r's principal: an admin's view, or for a
// member the roster.
func (s *server) appendListed(r *http.Request, b []byte, u store.User) ([]byte, error) {
	if principalFrom(r.Context()).User.Role == store.RoleAdmin {
		return appendUser(b, toUserJSON(u))
	}
	j, err := json.Marshal(rosterJSON{ID: u.ID, Username: u.Username, Email: u.Email, CreatedAt: u.CreatedAt.UTC()})
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
