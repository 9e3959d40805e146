// Command floor is the bench's floor for GET /api/me with an API key, and for Alertmanager's
// webhook (webhook.go): the smallest correct server for the same work as terdut-server's.
// For GET /api/me, one net/http handler hashes the Bearer token with SHA-256, looks the key up
// by its unique index joined to its owner by primary key (revoked keys refused), and writes
// the same JSON with the same headers; pgxpool with its
// defaults, as the server's store has them (pool size, cached prepared statements). It has no
// router, no middleware, no metrics, no gate and never writes last_used_at.
//
// The http.Server has the server's timeouts and header limit, and the process the server's
// garbage collector target (internal/gogc): they are part of serving HTTP correctly and of
// running a Go server, not of terdut-server's own code, whose cost the floor shows.
//
// Usage: floor --database-url postgres://... --listen 127.0.0.1:8081
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/terdut-server/terdut-server/internal/gogc"
)

const meSQL = `SELECT u.id, u.username, u.email, u.role, u.kind, u.oidc_subject IS NOT NULL,
	u.password_hash IS NOT NULL, u.created_at
	FROM api_keys k JOIN users u ON u.id = k.user_id
	WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`

type user struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Kind      string    `json:"kind"`
	SSO       bool      `json:"sso"`
	CreatedAt time.Time `json:"created_at"`
}

type me struct {
	User        user `json:"user"`
	HasPassword bool `json:"has_password"`
}

func main() {
	gogc.Set(os.Getenv) // the server's collector target: the floor is measured like for like
	dbURL := flag.String("database-url", "", "Postgres URL")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if err := run(*dbURL, *listen); err != nil {
		log.Fatalf("floor: %v", err)
	}
}

func run(dbURL, listen string) error {
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/me", func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(token) != 64 {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "unauthorized"})
			return
		}
		sum := sha256.Sum256([]byte(token))
		var m me
		err := pool.QueryRow(r.Context(), meSQL, sum[:]).Scan(&m.User.ID, &m.User.Username, &m.User.Email,
			&m.User.Role, &m.User.Kind, &m.User.SSO, &m.HasPassword, &m.User.CreatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "unauthorized"})
		case err != nil:
			writeJSON(w, http.StatusInternalServerError, map[string]string{"code": "internal"})
		default:
			writeJSON(w, http.StatusOK, m)
		}
	})
	mux.HandleFunc("POST /api/webhooks/alertmanager", webhook(pool))
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "floor listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return srv.Serve(ln)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
