package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BaselinePath is the route of the baseline server, the same as the
// gateway's send so the client builds the same request for both.
const BaselinePath = "/api/api-send-message"

// ServeBaseline runs the bare baseline server until ctx ends: net/http
// and a pgx pool of conns connections, one INSERT per request of the body
// a queued send carries, and the queued send's answer. It is what this
// machine can do for "accept a message and store it" with nothing else
// in the way (no auth, validation, rate limit, conversation, outbox or
// job): the gateway's figures are reported as a fraction of it.
func ServeBaseline(ctx context.Context, listen, databaseURL string, conns int32) error {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS baseline_messages (
		id bigserial PRIMARY KEY, sender_key text NOT NULL, contact_key text NOT NULL, text text NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create baseline table: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+BaselinePath, func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SenderKey  string `json:"sender_key"`
			ContactKey string `json:"contact_key"`
			Text       string `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
			http.Error(w, `{"message":"invalid body"}`, http.StatusBadRequest)
			return
		}
		if _, err := pool.Exec(r.Context(), `INSERT INTO baseline_messages (sender_key, contact_key, text) VALUES ($1, $2, $3)`,
			in.SenderKey, in.ContactKey, in.Text); err != nil {
			http.Error(w, `{"message":"insert failed"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"message":"Message queued for sending"}`)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
