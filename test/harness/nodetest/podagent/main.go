// Command podagent is the program of the pods test/harness/nodetest's tests run beside
// terdut-server: it plays terdut-operator (client.Reconcile with the service-account token
// the kubelet projects into its pod) and tries connections from inside the cluster, where
// Service addresses and NetworkPolicies apply, on behalf of the test, which calls it over
// HTTP at its pod address on the node's bridge.
//
//	GET  /dial?addr=host:port   200 when a TCP connection opens within 3 s, else 502 and why
//	GET  /get?url=...&bearer=.. the status and body (at most 64 KiB) of a GET, with the API
//	                            key bearer if given, as JSON
//	POST /post?url=...&bearer=. the same of a POST of this request's body (application/json),
//	                            such as Alertmanager's webhook with an integration key
//	POST /reconcile             client.Reconcile with the key in the body (may be empty);
//	                            the action, the generation and the new key as JSON
//	GET  /token                 the projected token's digest and its iat and exp claims
//	                            (never the token)
//
// It reads TERDUT_URL (the people's port), TERDUT_OPERATOR_URL (the operator's port) and
// TOKEN_FILE (the projected token) from its environment, and listens on :8080.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/client"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /dial", dial)
	mux.HandleFunc("GET /get", get)
	mux.HandleFunc("POST /post", post)
	mux.HandleFunc("POST /reconcile", reconcile)
	mux.HandleFunc("GET /token", token)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func dial(w http.ResponseWriter, r *http.Request) {
	addr := r.URL.Query().Get("addr")
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c.Close()
	io.WriteString(w, "ok\n")
}

func get(w http.ResponseWriter, r *http.Request) {
	forward(w, r, http.MethodGet, nil)
}

func post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	forward(w, r, http.MethodPost, body)
}

// forward makes the request the query names (url, bearer) with method and body, and answers
// its status and body as JSON.
func forward(w http.ResponseWriter, r *http.Request, method string, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), method, r.URL.Query().Get("url"), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key := r.URL.Query().Get("bearer"); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	writeJSON(w, map[string]any{"status": resp.StatusCode, "body": string(answer)})
}

func reconcile(w http.ResponseWriter, r *http.Request) {
	held, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := client.New(os.Getenv("TERDUT_URL"), client.WithOperatorURL(os.Getenv("TERDUT_OPERATOR_URL")),
		client.WithOperatorTokenFile(os.Getenv("TOKEN_FILE")), client.WithTimeout(10*time.Second))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	res, err := c.Reconcile(ctx, strings.TrimSpace(string(held)))
	out := map[string]any{"action": res.Action, "generation": res.Generation, "key": res.APIKey.Key}
	if err != nil {
		out["error"] = err.Error()
		var ce *client.Error
		if errors.As(err, &ce) {
			out["status"] = ce.Status
		}
	}
	writeJSON(w, out)
}

func token(w http.ResponseWriter, _ *http.Request) {
	b, err := os.ReadFile(os.Getenv("TOKEN_FILE"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	tok := strings.TrimSpace(string(b))
	sum := sha256.Sum256([]byte(tok))
	var claims struct {
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if parts := strings.Split(tok, "."); len(parts) == 3 {
		if payload, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			_ = json.Unmarshal(payload, &claims)
		}
	}
	writeJSON(w, map[string]any{"sha256": hex.EncodeToString(sum[:]), "iat": claims.Iat, "exp": claims.Exp, "sub": claims.Sub})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
