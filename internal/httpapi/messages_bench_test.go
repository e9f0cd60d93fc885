package httpapi_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// benchDBs runs a benchmark on SQLite and, with TEST_DATABASE_URL, on
// PostgreSQL.
func benchDBs(b *testing.B, fn func(b *testing.B, db *store.DB)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, storetest.SQLite(b)) })
	if os.Getenv(storetest.EnvPostgres) != "" {
		b.Run("postgres", func(b *testing.B) { fn(b, storetest.Postgres(b)) })
	}
}

// BenchmarkOfficialSendSync measures a synchronous official text send end
// to end: router, validation, rate limit, window, quota, two transactions
// with their events, and the provider round trip to providersim.
func BenchmarkOfficialSendSync(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newOfficialEnv(b, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		// One company is limited to 600 sends per minute: spread the load
		// over the fixed test clock so the limiter never refuses.
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			e.clk.Advance(100 * time.Millisecond) // one send's share of the budget
			if r := e.send(map[string]any{"text": fmt.Sprint("m", i)}); r.Status != http.StatusOK {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
		}
	})
}

// BenchmarkOfficialSendQueued measures accepting a queued send (stored,
// event and job inserted; the worker is not running).
func BenchmarkOfficialSendQueued(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newOfficialEnv(b, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			e.clk.Advance(100 * time.Millisecond)
			if r := e.send(map[string]any{"text": fmt.Sprint("q", i), "enqueue": true}); r.Status != http.StatusOK {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
		}
	})
}

// BenchmarkProviderWebhookInbound measures a signed inbound webhook with
// one new text message (signature check, conversation, message, events).
func BenchmarkProviderWebhookInbound(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newOfficialEnv(b, db, ofcEnvOptions{noWorkers: true})
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"C"},"wa_id":"55119%08d"}],"messages":[{"from":"55119%08d","id":"wamid.bench-%d","timestamp":"1764770000","type":"text","text":{"body":"oi"}}]}}]}]}`, e.pnid, i%50, i%50, i))
			r := e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + e.pnid, JSON: body,
				Header: http.Header{"X-Hub-Signature-256": {official.Sign(ofcAppSecret, body)}}})
			if r.Status != http.StatusOK {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
		}
	})
}
