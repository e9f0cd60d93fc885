package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// schemeReceiver is a subscriber on 127.0.0.1 that answers with a status the
// test switches, and checks every request as a subscriber would: headers and
// body against the AsyncAPI document, the signature of the scheme it expects
// with the subscription's secret.
type schemeReceiver struct {
	t      testing.TB
	srv    *httptest.Server
	status atomic.Int32

	mu       sync.Mutex
	secret   string
	scheme   string
	received []delivery
	problems []string
}

func newSchemeReceiver(t testing.TB) *schemeReceiver {
	r := &schemeReceiver{t: t}
	r.status.Store(http.StatusOK)
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		r.srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range r.problems {
			t.Errorf("webhook delivery: %s", p)
		}
	})
	return r
}

func (r *schemeReceiver) expect(secret, scheme string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret, r.scheme = secret, scheme
}

func (r *schemeReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{Name: req.Header.Get("X-Svc-Event"), Header: req.Header.Clone(), Body: body}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := eventschema.ValidateHeaders(d.Name, req.Header); err != nil {
		r.problems = append(r.problems, err.Error())
	}
	if err := eventschema.ValidatePayload(d.Name, body); err != nil {
		r.problems = append(r.problems, err.Error())
	}
	var err error
	switch r.scheme {
	case "standard-webhooks":
		err = subscriber.VerifyStandard(r.secret, req.Header, body, time.Now(), 0)
		if req.Header.Get("X-Svc-Signature") != "" || req.Header.Get("webhook-id") != req.Header.Get("X-Svc-Delivery") {
			err = fmt.Errorf("standard-webhooks delivery with headers %v", req.Header)
		}
	default:
		err = subscriber.Verify(r.secret, req.Header, body, time.Now(), 0)
		if req.Header.Get("webhook-signature") != "" {
			err = fmt.Errorf("svc delivery with headers %v", req.Header)
		}
	}
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s signature of %s: %v", r.scheme, d.Name, err))
	}
	r.received = append(r.received, d)
	w.WriteHeader(int(r.status.Load()))
}

// requests returns every request received for delivery id so far.
func (r *schemeReceiver) requests(id string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []delivery
	for _, d := range r.received {
		if d.Header.Get("X-Svc-Delivery") == id {
			out = append(out, d)
		}
	}
	return out
}

// logEntries waits until subscription sub's delivery log holds n entries of
// delivery id (read from the table: polling the API would spend the rate
// limit) and returns whether each succeeded, oldest first.
func logEntries(t testing.TB, db *store.DB, sub int, id string, n int) []bool {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		var ok []bool
		err := db.Bun.NewSelect().Table("webhook_delivery_log").Column("succeeded").
			Where("subscription_id = ?", sub).Where("delivery_id = ?", id).Order("id").Scan(context.Background(), &ok)
		if err != nil {
			t.Fatal(err)
		}
		// A finished delivery's row is gone from the queue in the same
		// transaction that writes its last entry.
		if len(ok) >= n {
			return ok
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s: %d log entries, want %d", id, len(ok), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastDeliveryID is the delivery id of subscription sub's newest log entry.
func lastDeliveryID(t testing.TB, db *store.DB, sub int) string {
	t.Helper()
	var id string
	if err := db.Bun.NewSelect().Table("webhook_delivery_log").Column("delivery_id").Where("subscription_id = ?", sub).
		Order("id DESC").Limit(1).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	return id
}

// ping queues a test ping to sub and returns its delivery id once its first
// attempt is logged.
func ping(t testing.TB, h *apitest.Harness, db *store.DB, token string, sub int, before int) string {
	t.Helper()
	if resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", sub), Token: token}); resp.Status != http.StatusOK {
		t.Fatalf("test: %d %s", resp.Status, resp.Body)
	}
	deadline := time.Now().Add(waitLimit)
	for {
		n, err := db.Bun.NewSelect().Table("webhook_delivery_log").Where("subscription_id = ?", sub).Count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if int(n) > before {
			return lastDeliveryID(t, db, sub)
		}
		if time.Now().After(deadline) {
			t.Fatal("test ping never logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func queuedAnswer(t testing.TB, resp *apitest.Response, want int) {
	t.Helper()
	var out struct {
		Success bool   `json:"success"`
		Queued  int    `json:"queued"`
		Message string `json:"message"`
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &out)
	if !out.Success || out.Queued != want || out.Message == "" {
		t.Fatalf("answer %s, want queued %d", resp.Body, want)
	}
}

// TestWebhookSignatureSchemesAndRedelivery runs the real workers: deliveries
// of both signature schemes verified by a receiver on 127.0.0.1, redelivery
// of a delivered and of a failed delivery, and recover with since.
func TestWebhookSignatureSchemesAndRedelivery(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rcv := newSchemeReceiver(t)
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		created := createWebhookScheme(t, h, ten.Token, map[string]any{"name": "std", "url": rcv.srv.URL + "/hook",
			"events": []string{"crm.business.won"}, "signature_scheme": "standard-webhooks"})
		sub := created.ID
		if created.SignatureScheme != "standard-webhooks" {
			t.Fatalf("created with scheme %q", created.SignatureScheme)
		}
		rcv.expect(created.Secret, "standard-webhooks")

		// Standard Webhooks: delivered, then redelivered under the same id.
		id := ping(t, h, db, ten.Token, sub, 0)
		if got := logEntries(t, db, sub, id, 1); !got[0] {
			t.Fatalf("ping not delivered: %v", got)
		}
		resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries/%s/redeliver", sub, id), Token: ten.Token})
		queuedAnswer(t, resp, 1)
		if got := logEntries(t, db, sub, id, 2); !got[1] {
			t.Fatalf("redelivery not delivered: %v", got)
		}
		reqs := rcv.requests(id)
		if len(reqs) != 2 || string(reqs[0].Body) != string(reqs[1].Body) || reqs[1].Header.Get("webhook-id") != id ||
			reqs[1].Header.Get("X-Svc-Attempt") != "1" {
			t.Fatalf("redelivered requests: %+v", reqs)
		}

		// Back to the document's scheme; a failed delivery (400 ends it at
		// once) redelivered once the receiver is fixed.
		resp = h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", sub), Token: ten.Token,
			JSON: map[string]any{"signature_scheme": "svc"}})
		if m := resp.Map(t); resp.Status != http.StatusOK || m["data"].(map[string]any)["signature_scheme"] != "svc" {
			t.Fatalf("update scheme: %d %s", resp.Status, resp.Body)
		}
		rcv.expect(created.Secret, "svc")
		rcv.status.Store(http.StatusBadRequest)
		failed := ping(t, h, db, ten.Token, sub, 2)
		if got := logEntries(t, db, sub, failed, 1); got[0] {
			t.Fatalf("ping to a 400 receiver succeeded: %v", got)
		}
		rcv.status.Store(http.StatusOK)
		resp = h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries/%s/redeliver", sub, failed), Token: ten.Token})
		queuedAnswer(t, resp, 1)
		if got := logEntries(t, db, sub, failed, 2); !got[1] {
			t.Fatalf("redelivery of the failed delivery: %v", got)
		}

		// Recover: two failures since the mark are queued again, once.
		mark := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
		rcv.status.Store(http.StatusGone)
		f1 := ping(t, h, db, ten.Token, sub, 4)
		logEntries(t, db, sub, f1, 1)
		f2 := ping(t, h, db, ten.Token, sub, 5)
		logEntries(t, db, sub, f2, 1)
		rcv.status.Store(http.StatusOK)
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		queuedAnswer(t, h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), Token: ten.Token,
			JSON: map[string]any{"since": future}}), 0)
		queuedAnswer(t, h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), Token: ten.Token,
			JSON: map[string]any{"since": mark}}), 2)
		for _, f := range []string{f1, f2} {
			if got := logEntries(t, db, sub, f, 2); !got[1] {
				t.Fatalf("recovered %s: %v", f, got)
			}
		}
		// Delivered now: nothing failed left since the mark.
		queuedAnswer(t, h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), Token: ten.Token,
			JSON: map[string]any{"since": mark}}), 0)
		if n := len(rcv.requests(f1)); n != 2 {
			t.Errorf("%s received %d times, want 2", f1, n)
		}
	})
}

type createdScheme struct {
	ID              int
	Secret          string
	SignatureScheme string
}

func createWebhookScheme(t testing.TB, h *apitest.Harness, token string, body map[string]any) createdScheme {
	t.Helper()
	resp := h.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: token, JSON: body})
	var out struct {
		Data struct {
			ID              int    `json:"id"`
			SignatureScheme string `json:"signature_scheme"`
		} `json:"data"`
		Secret string `json:"secret"`
	}
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &out)
	return createdScheme{ID: out.Data.ID, Secret: out.Secret, SignatureScheme: out.Data.SignatureScheme}
}

// TestWebhookRedeliveryRules covers the answers of redeliver and recover that
// need no delivery to run: validation, unknown and foreign ids, a delivery
// still queued, a disabled subscription, and permissions.
func TestWebhookRedeliveryRules(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{}) // jobs are only inserted: deliveries stay queued
		a := h.Tenant("Acme")
		b := h.Tenant("Bravo")
		created := createWebhookScheme(t, h, a.Token, map[string]any{"name": "n", "url": "https://example.com/h"})
		if created.SignatureScheme != "svc" {
			t.Errorf("default scheme %q, want svc", created.SignatureScheme)
		}
		sub := created.ID
		other := createWebhookScheme(t, h, a.Token, map[string]any{"name": "other", "url": "https://example.com/o"}).ID
		disabled := createWebhookScheme(t, h, a.Token, map[string]any{"name": "off", "url": "https://example.com/off", "enabled": false}).ID
		if resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", sub), Token: a.Token}); resp.Status != http.StatusOK {
			t.Fatalf("test: %d %s", resp.Status, resp.Body)
		}
		if err := h.App.Webhooks.FanOut(context.Background()); err != nil {
			t.Fatal(err)
		}
		var queued string
		if err := db.Bun.NewSelect().Table("webhook_deliveries").Column("delivery_id").Where("subscription_id = ?", sub).
			Limit(1).Scan(context.Background(), &queued); err != nil {
			t.Fatal(err)
		}
		const unknown = "0b8f3c2e-5d1a-4f7b-9c6e-2a4d8e1f3b57"
		redeliver := func(sub int, id string) string {
			return fmt.Sprintf("/api/channel-webhooks/%d/deliveries/%s/redeliver", sub, id)
		}
		recover := func(sub int) string { return fmt.Sprintf("/api/channel-webhooks/%d/recover", sub) }
		since := map[string]any{"since": "2026-11-22T00:00:00Z"}
		tests := []struct {
			name   string
			req    apitest.Request
			status int
			msg    string
		}{
			{"unknown delivery", apitest.Request{Method: "POST", Path: redeliver(sub, unknown)}, 509, "Delivery not found."},
			{"delivery still queued", apitest.Request{Method: "POST", Path: redeliver(sub, queued)}, 509, "Delivery is already queued."},
			{"another subscription's delivery", apitest.Request{Method: "POST", Path: redeliver(other, queued)}, 509, "Delivery not found."},
			{"malformed delivery id", apitest.Request{Method: "POST", Path: redeliver(sub, "not-a-uuid")}, 422, "Delivery id must be a UUID"},
			{"unknown subscription", apitest.Request{Method: "POST", Path: redeliver(987654, unknown)}, 509, "Webhook not found."},
			{"another company's subscription", apitest.Request{Method: "POST", Path: redeliver(sub, queued), Token: b.Token}, 509, "Webhook not found."},
			{"disabled subscription", apitest.Request{Method: "POST", Path: redeliver(disabled, unknown)}, 509, "Webhook is disabled."},
			{"recover without since", apitest.Request{Method: "POST", Path: recover(sub), JSON: map[string]any{}}, 422, "Since is required"},
			{"recover with a bad since", apitest.Request{Method: "POST", Path: recover(sub), JSON: map[string]any{"since": "yesterday"}}, 422, "Since must be an RFC 3339 date-time"},
			{"recover another company's", apitest.Request{Method: "POST", Path: recover(sub), JSON: since, Token: b.Token}, 509, "Webhook not found."},
			{"recover unknown", apitest.Request{Method: "POST", Path: recover(987654), JSON: since}, 509, "Webhook not found."},
			{"recover disabled", apitest.Request{Method: "POST", Path: recover(disabled), JSON: since}, 509, "Webhook is disabled."},
			{"recover: the queued ping has not failed", apitest.Request{Method: "POST", Path: recover(sub), JSON: since}, 200, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := tt.req
				if r.Token == "" {
					r.Token = a.Token
				}
				resp := h.Do(r)
				if resp.Status != tt.status {
					t.Errorf("%d %s, want %d", resp.Status, resp.Body, tt.status)
					return
				}
				if tt.msg != "" && resp.Map(t)["message"] != tt.msg {
					t.Errorf("%s, want message %q", resp.Body, tt.msg)
				}
				if tt.status == 200 {
					queuedAnswer(t, resp, 0)
				}
			})
		}

		// channel_webhooks_update is required; it alone is enough.
		without := tokenWithout(t, h, a.UserID, auth.PermWebhooksUpdate)
		only, _, err := h.App.Auth.CreateToken(context.Background(), a.UserID, "only", []string{auth.PermWebhooksUpdate}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []apitest.Request{{Method: "POST", Path: redeliver(sub, unknown)}, {Method: "POST", Path: recover(sub), JSON: since}} {
			r.Token = without
			if resp := h.Do(r); resp.Status != http.StatusForbidden {
				t.Errorf("%s without %s: %d %s", r.Path, auth.PermWebhooksUpdate, resp.Status, resp.Body)
			}
			r.Token = only
			if resp := h.Do(r); resp.Status == http.StatusForbidden || resp.Status == http.StatusUnauthorized {
				t.Errorf("%s with only %s: %d %s", r.Path, auth.PermWebhooksUpdate, resp.Status, resp.Body)
			}
		}
		if resp := h.Do(apitest.Request{Method: "POST", Path: recover(sub), JSON: since}); resp.Status != http.StatusUnauthorized {
			t.Errorf("without a token: %d", resp.Status)
		}
	})
}

// TestWebhookRecoverGoesThroughTheSSRFGuard: a recovered delivery takes the
// path of every delivery, so a destination the guard refuses is refused
// again (and logged again), never reached.
func TestWebhookRecoverGoesThroughTheSSRFGuard(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		mark := time.Now().Add(-time.Second).UTC().Format(time.RFC3339)
		// A private address: outside the tests' allow-list (loopback only).
		// Create refuses such a literal address (TestSubscriptionURLGuard),
		// so the row is given it directly, as a subscription stored before
		// an operator narrowed OUTBOUND_ALLOW_CIDRS would hold it.
		sub := createWebhookScheme(t, h, ten.Token, map[string]any{"name": "internal", "url": "http://127.0.0.1:9/hook"}).ID
		if _, err := db.Bun.NewUpdate().Table("webhook_subscriptions").Set("url = ?", "http://10.255.255.1/hook").
			Where("id = ?", sub).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := ping(t, h, db, ten.Token, sub, 0)
		queuedAnswer(t, h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), Token: ten.Token,
			JSON: map[string]any{"since": mark}}), 1)
		if got := logEntries(t, db, sub, id, 2); got[0] || got[1] {
			t.Fatalf("attempts to a refused destination succeeded: %v", got)
		}
		var errs []string
		if err := db.Bun.NewSelect().Table("webhook_delivery_log").Column("error").Where("delivery_id = ?", id).
			Scan(context.Background(), &errs); err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != webhooks.MsgDestinationRefused {
				t.Errorf("log error %q, want %q", e, webhooks.MsgDestinationRefused)
			}
		}
	})
}

// TestWebhookRedeliveryRateLimit: redeliver and recover spend the token's
// management budget like the other webhook operations.
func TestWebhookRedeliveryRateLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
		ten := h.Tenant("Acme")
		sub := createWebhookScheme(t, h, ten.Token, map[string]any{"name": "n", "url": "https://example.com/h"}).ID // 1 request
		since := map[string]any{"since": "2026-11-22T00:00:00Z"}
		for i := 1; i < webhooks.ManagementLimit; i++ {
			if resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), Token: ten.Token, JSON: since}); resp.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i+1, resp.Status, resp.Body)
			}
		}
		for _, r := range []apitest.Request{
			{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/recover", sub), JSON: since},
			{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries/0b8f3c2e-5d1a-4f7b-9c6e-2a4d8e1f3b57/redeliver", sub)},
		} {
			r.Token = ten.Token
			if resp := h.Do(r); resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s over the limit: %d %v %s", r.Path, resp.Status, resp.Header, resp.Body)
			}
		}
	})
}
