package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// Integrations are admins': each is one Alertmanager cluster sending to the webhook, with keys
// that authenticate that route and nothing else. A key's secret is answered once, when made.

type integrationKeyJSON struct {
	ID         int64      `json:"id"`
	Hint       string     `json:"hint"` // the secret's last four characters
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Key        string     `json:"key,omitempty"` // the secret: only in the answer that made it
}

type integrationJSON struct {
	ID             int64                `json:"id"`
	Name           string               `json:"name"`
	ExpireAfter    string               `json:"expire_after"`
	CreatedAt      time.Time            `json:"created_at"`
	LastDeliveryAt *time.Time           `json:"last_delivery_at"`
	LastError      string               `json:"last_error,omitempty"`
	LastErrorAt    *time.Time           `json:"last_error_at,omitempty"`
	Keys           []integrationKeyJSON `json:"keys"`
}

func toIntegrationKeyJSON(k store.IntegrationKey, secret string) integrationKeyJSON {
	return integrationKeyJSON{ID: k.ID, Hint: k.Hint, CreatedAt: k.CreatedAt.UTC(), LastUsedAt: utc(k.LastUsedAt), Key: secret}
}

func toIntegrationJSON(in store.Integration, secret string) integrationJSON {
	out := integrationJSON{ID: in.ID, Name: in.Name, ExpireAfter: in.ExpireAfter.String(), CreatedAt: in.CreatedAt.UTC(),
		LastDeliveryAt: utc(in.LastDeliveryAt), LastError: in.LastError, LastErrorAt: utc(in.LastErrorAt),
		Keys: make([]integrationKeyJSON, len(in.Keys))}
	for i, k := range in.Keys {
		out.Keys[i] = toIntegrationKeyJSON(k, secret)
	}
	return out
}

// Bounds of an integration's expire_after: at least Alertmanager's smallest sensible
// group_interval, at most a week.
const (
	minExpireAfter = time.Minute
	maxExpireAfter = 7 * 24 * time.Hour
)

func (s *server) handleIntegrationCreate() http.Handler {
	type request struct {
		Name        string `json:"name"`
		ExpireAfter string `json:"expire_after"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		name, err := checkName(req.Name, "An integration's name")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		expire := store.DefaultExpireAfter
		if req.ExpireAfter != "" {
			d, err := time.ParseDuration(req.ExpireAfter)
			if err != nil || d < minExpireAfter || d > maxExpireAfter {
				s.writeError(w, r, errBadRequest("invalid_expire_after",
					"expire_after is a Go duration from 1m to 168h, longer than Alertmanager's repeat_interval plus group_interval (default 4h30m)."))
				return
			}
			expire = d
		}
		in, secret, err := s.store.CreateIntegration(r.Context(), store.NewIntegration{Name: name, ExpireAfter: expire,
			CreatedBy: principalFrom(r.Context()).User.ID})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "integration.created", Detail: fmt.Sprintf("integration %d %q, key %d", in.ID, in.Name, in.Keys[0].ID)})
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, toIntegrationJSON(in, secret))
	})
}

func (s *server) handleIntegrationList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := s.store.Integrations(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out := make([]integrationJSON, len(list))
		for i, in := range list {
			out[i] = toIntegrationJSON(in, "")
		}
		writeJSON(w, http.StatusOK, out)
	})
}

func (s *server) handleIntegrationDelete() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		name, err := s.store.DeleteIntegration(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "integration.deleted", Detail: fmt.Sprintf("integration %d %q", id, name)})
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *server) handleIntegrationKeyCreate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		k, secret, err := s.store.AddIntegrationKey(r.Context(), id, principalFrom(r.Context()).User.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "integration.key_created", Detail: fmt.Sprintf("integration %d key %d", id, k.ID)})
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, toIntegrationKeyJSON(k, secret))
	})
}

func (s *server) handleIntegrationKeyDelete() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		keyID, err := pathID(r, "keyID")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.store.RevokeIntegrationKey(r.Context(), id, keyID); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "integration.key_revoked", Detail: fmt.Sprintf("integration %d key %d", id, keyID)})
		w.WriteHeader(http.StatusNoContent)
	})
}
