package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

// JobBaselineOptions configure the baselines of the job itself: the least
// a durable gateway does for a queued send (ServeBaselineSend) and for a
// webhook delivery (ServeBaselineDelivery), with net/http and pgx and
// nothing else.
type JobBaselineOptions struct {
	Listen      string
	DatabaseURL string
	Conns       int32 // pgx pool size
	Workers     int   // worker goroutines
	// ProviderURL, PhoneNumberID and AccessToken are the provider account
	// the send baseline posts to (the same provider simulator as the
	// gateway's sends).
	ProviderURL, PhoneNumberID, AccessToken string
	// DeliverURL and Secret are the endpoint the delivery baseline posts
	// to and the secret it signs with (the same receiver as the gateway's
	// deliveries, which verifies the signature the same way).
	DeliverURL, Secret string
}

// jobServer is what both job baselines share: the pool, the HTTP server,
// the workers and the wake-up of idle workers when a row is written.
type jobServer struct {
	o    JobBaselineOptions
	pool *pgxpool.Pool
	mux  *http.ServeMux
	wake chan struct{}
	http *http.Client
}

func newJobServer(ctx context.Context, o JobBaselineOptions, schema string) (*jobServer, error) {
	cfg, err := pgxpool.ParseConfig(o.DatabaseURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = max(o.Conns, 1)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create baseline tables: %w", err)
	}
	s := &jobServer{o: o, pool: pool, mux: http.NewServeMux(), wake: make(chan struct{}, 1),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	return s, nil
}

// notify wakes an idle worker.
func (s *jobServer) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// serve runs the HTTP server and Workers copies of work (which returns
// false when it found nothing to do) until ctx ends.
func (s *jobServer) serve(ctx context.Context, work func(ctx context.Context) (bool, error)) error {
	defer s.pool.Close()
	ln, err := net.Listen("tcp", s.o.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var wg sync.WaitGroup
	for range max(s.o.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				did, err := work(ctx)
				if err != nil && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond) // a failed statement or call: the row stays for a retry
				}
				if did {
					s.notify() // there may be more: pass the word on
					continue
				}
				select {
				case <-s.wake:
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
				}
			}
		}()
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdown); serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeBaselineSend is baseline-send: a POST of the send's body INSERTs
// the message (state queued) and answers as the queued send does; a pool
// of workers claims queued messages one at a time (UPDATE … FOR UPDATE
// SKIP LOCKED), POSTs each to the provider and UPDATEs its outcome and
// the provider's id.
func ServeBaselineSend(ctx context.Context, o JobBaselineOptions) error {
	s, err := newJobServer(ctx, o, `CREATE TABLE IF NOT EXISTS baseline_sends (
		id bigserial PRIMARY KEY, sender_key text NOT NULL, contact_key text NOT NULL, text text NOT NULL,
		state smallint NOT NULL DEFAULT 0, external_id text, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz);
		CREATE INDEX IF NOT EXISTS baseline_sends_queued ON baseline_sends (id) WHERE state = 0`)
	if err != nil {
		return err
	}
	s.mux.HandleFunc("POST "+BaselinePath, func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			SenderKey  string `json:"sender_key"`
			ContactKey string `json:"contact_key"`
			Text       string `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
			http.Error(w, `{"message":"invalid body"}`, http.StatusBadRequest)
			return
		}
		if _, err := s.pool.Exec(r.Context(), `INSERT INTO baseline_sends (sender_key, contact_key, text) VALUES ($1, $2, $3)`,
			in.SenderKey, in.ContactKey, in.Text); err != nil {
			http.Error(w, `{"message":"insert failed"}`, http.StatusInternalServerError)
			return
		}
		s.notify()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"message":"Message queued for sending"}`)
	})
	sendURL := o.ProviderURL + "/" + o.PhoneNumberID + "/messages"
	return s.serve(ctx, func(ctx context.Context) (bool, error) {
		var id int64
		var contact, text string
		err := s.pool.QueryRow(ctx, `UPDATE baseline_sends SET state = 1, updated_at = now() WHERE id = (
			SELECT id FROM baseline_sends WHERE state = 0 ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, contact_key, text`).
			Scan(&id, &contact, &text)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		body, _ := json.Marshal(map[string]any{"messaging_product": "whatsapp", "recipient_type": "individual", "to": contact,
			"type": "text", "text": map[string]any{"body": text}, "biz_opaque_callback_data": strconv.FormatInt(id, 10)})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sendURL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+o.AccessToken)
		state, external := int16(3), ""
		if resp, err := s.http.Do(req); err == nil {
			var out struct {
				Messages []struct {
					ID string `json:"id"`
				} `json:"messages"`
			}
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&out) == nil && len(out.Messages) > 0 {
				state, external = 2, out.Messages[0].ID
			}
			resp.Body.Close()
		}
		_, err = s.pool.Exec(ctx, `UPDATE baseline_sends SET state = $2, external_id = NULLIF($3, ''), updated_at = now() WHERE id = $1`,
			id, state, external)
		return true, err
	})
}

// ServeBaselineDelivery is baseline-delivery: a POST of an event
// ({event, data}, as POST /api/events) INSERTs one outbox row per
// delivery (one endpoint here) holding the envelope; a pool of workers
// takes a row (FOR UPDATE SKIP LOCKED, in a transaction), POSTs it signed
// as the gateway signs (HMAC-SHA256 of timestamp "." body, X-Svc-*
// headers) to the endpoint, and in the same transaction writes the log
// row and deletes the outbox row.
func ServeBaselineDelivery(ctx context.Context, o JobBaselineOptions) error {
	s, err := newJobServer(ctx, o, `CREATE TABLE IF NOT EXISTS baseline_outbox (
		id bigserial PRIMARY KEY, delivery_id text NOT NULL, event text NOT NULL, body bytea NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE IF NOT EXISTS baseline_delivery_log (
		id bigserial PRIMARY KEY, delivery_id text NOT NULL, status integer NOT NULL, attempted_at timestamptz NOT NULL DEFAULT now())`)
	if err != nil {
		return err
	}
	s.mux.HandleFunc("POST /api/events", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Event == "" {
			http.Error(w, `{"message":"invalid body"}`, http.StatusBadRequest)
			return
		}
		id := newUUID()
		body, _ := json.Marshal(map[string]any{"event": in.Event, "delivery_id": id, "company_id": 1,
			"occurred_at": time.Now().Format(time.RFC3339), "description": "baseline", "data": in.Data})
		if _, err := s.pool.Exec(r.Context(), `INSERT INTO baseline_outbox (delivery_id, event, body) VALUES ($1, $2, $3)`,
			id, in.Event, body); err != nil {
			http.Error(w, `{"message":"insert failed"}`, http.StatusInternalServerError)
			return
		}
		s.notify()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"success":true,"message":"Event published"}`)
	})
	return s.serve(ctx, func(ctx context.Context) (bool, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return false, err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		var rowID int64
		var delivery, event string
		var body []byte
		err = tx.QueryRow(ctx, `SELECT id, delivery_id, event, body FROM baseline_outbox ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1`).
			Scan(&rowID, &delivery, &event, &body)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, o.DeliverURL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(subscriber.HeaderEvent, event)
		req.Header.Set(subscriber.HeaderDelivery, delivery)
		req.Header.Set(subscriber.HeaderTimestamp, ts)
		req.Header.Set(subscriber.HeaderSignature, subscriber.Sign(o.Secret, ts, body))
		req.Header.Set(subscriber.HeaderAttempt, "1")
		status := 0
		if resp, err := s.http.Do(req); err == nil {
			status = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if status/100 != 2 {
			// Failed: the row stays for a later attempt (a retry schedule
			// is beyond the least a sender does; the load never fails).
			return true, fmt.Errorf("delivery %s: status %d", delivery, status)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO baseline_delivery_log (delivery_id, status) VALUES ($1, $2)`, delivery, status); err != nil {
			return true, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM baseline_outbox WHERE id = $1`, rowID); err != nil {
			return true, err
		}
		return true, tx.Commit(ctx)
	})
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
