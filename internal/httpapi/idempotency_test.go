package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/idempotency"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// withKey is req carrying an Idempotency-Key.
func withKey(req apitest.Request, key string) apitest.Request {
	req.Header = http.Header{"Idempotency-Key": {key}}
	return req
}

// TestIdempotencyKey drives sends on a paired chat-app connection, whose
// simulator outbox counts what really reached the transport: a repeat
// replays, a different request with the key is refused, concurrent repeats
// send once, other companies' keys are their own, and keys expire after
// 24 hours on the injected clock.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		h, c := startConnections(t, db, apitest.Options{Now: clk.Now})
		conn := c.pair(c.create("Sales", "5511988887777").ID)
		sendBody := func(text string) string {
			return fmt.Sprintf(`{"platform":"chatapp","sender_key":%q,"contact_key":"5511977776666","contact_is_group":false,"text":%q,"enqueue":false}`, conn.Key, text)
		}
		send := func(key, body string) *apitest.Response {
			return h.Do(withKey(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: c.token, JSON: body}, key))
		}
		sent := func() int { return len(c.outbox(conn.ID)) }

		first := send("order-1", sendBody("hello"))
		if first.Status != http.StatusOK || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first send: %d %v %s", first.Status, first.Header, first.Body)
		}
		// The same members in another order and spacing are the same request.
		reordered := fmt.Sprintf(`{ "enqueue": false, "text": "hello", "contact_is_group": false, "contact_key": "5511977776666", "sender_key": %q, "platform": "chatapp" }`, conn.Key)
		again := send("order-1", reordered)
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
			again.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
			t.Fatalf("replay: %d %v %s, want %d %s", again.Status, again.Header, again.Body, first.Status, first.Body)
		}
		if n := sent(); n != 1 {
			t.Fatalf("chat app received %d messages after a replay, want 1", n)
		}

		refusals := []struct {
			name string
			req  apitest.Request
		}{
			{"another body", apitest.Request{Method: "POST", Path: "/api/api-send-message", JSON: sendBody("bye")}},
			{"another operation", apitest.Request{Method: "POST", Path: "/api/chatapp-create", JSON: map[string]any{"name": "x", "key": "5511955554444"}}},
		}
		for _, tc := range refusals {
			t.Run(tc.name, func(t *testing.T) {
				tc.req.Token = c.token
				resp := h.Do(withKey(tc.req, "order-1"))
				var body validationAnswer
				resp.JSON(t, &body)
				if resp.Status != http.StatusUnprocessableEntity || body.Message != "This Idempotency-Key was already used for a different request." ||
					len(body.Errors["Idempotency-Key"]) != 1 {
					t.Errorf("with a used key: %d %s", resp.Status, resp.Body)
				}
			})
		}
		if n := sent(); n != 1 || len(c.list("").Data) != 1 {
			t.Fatalf("a refused key did work: %d messages, %d connections", n, len(c.list("").Data))
		}

		// Concurrent duplicates: one send, every caller gets its answer.
		var wg sync.WaitGroup
		answers := make([]*apitest.Response, 6)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = send("order-2", sendBody("at once"))
			}()
		}
		wg.Wait()
		for i, a := range answers {
			if a.Status != http.StatusOK || !bytes.Equal(a.Body, answers[0].Body) {
				t.Errorf("concurrent duplicate %d: %d %s, want %s", i, a.Status, a.Body, answers[0].Body)
			}
		}
		if n := sent(); n != 2 {
			t.Fatalf("chat app received %d messages after 6 concurrent duplicates, want 2 in all", n)
		}

		// Another company's same key is its own.
		other := h.Tenant("Other")
		created := h.Do(withKey(apitest.Request{Method: "POST", Path: "/api/chatapp-create", Token: other.Token,
			JSON: map[string]any{"name": "Theirs", "key": "5511944443333"}}, "order-1"))
		if created.Status != http.StatusOK || created.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("other company's key: %d %s", created.Status, created.Body)
		}

		// A malformed key is the operation's validation error.
		if resp := send("two words", sendBody("hello")); resp.Status != 509 || resp.Map(t)["message"] != "Idempotency key must be 1 to 255 visible ASCII characters" {
			t.Errorf("malformed key: %d %s", resp.Status, resp.Body)
		}

		// Kept 24 hours: replayed just before, done again after.
		clk.Advance(idempotency.TTL - time.Second)
		if resp := send("order-1", sendBody("hello")); resp.Header.Get("Idempotent-Replayed") != "true" || sent() != 2 {
			t.Fatalf("before expiry: %d %v, %d sent", resp.Status, resp.Header, sent())
		}
		clk.Advance(time.Second)
		if resp := send("order-1", sendBody("hello")); resp.Status != http.StatusOK || resp.Header.Get("Idempotent-Replayed") != "" || sent() != 3 {
			t.Fatalf("after expiry: %d %v %s, %d sent", resp.Status, resp.Header, resp.Body, sent())
		}
	})
}
