package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/uptrace/bun"

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
// event and job inserted; the worker is not running). With PG_STATS=1 on
// PostgreSQL it also reports what one send costs the database (see
// pgCounters).
func BenchmarkOfficialSendQueued(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newOfficialEnv(b, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		before := readPGCounters(b, db)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			e.clk.Advance(100 * time.Millisecond)
			if r := e.send(map[string]any{"text": fmt.Sprint("q", i), "enqueue": true}); r.Status != http.StatusOK {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
		}
		before.report(b, db)
	})
}

// BenchmarkOfficialSendWorked measures one attempt of the send queue
// (claim, hand-off, provider call to providersim, outcome with its event);
// PG_STATS=1 as for BenchmarkOfficialSendQueued.
func BenchmarkOfficialSendWorked(b *testing.B) {
	benchDBs(b, func(b *testing.B, db *store.DB) {
		e := newOfficialEnv(b, db, ofcEnvOptions{noWorkers: true})
		e.contactWrites(ofcContactKey, "Oi")
		ids := make([]int64, b.N)
		for i := range ids {
			e.clk.Advance(100 * time.Millisecond)
			ids[i] = e.queue(fmt.Sprint("w", i))
		}
		// Each attempt claims its own message alone (runSendJob makes it
		// due).
		if _, err := db.Bun.NewUpdate().Table("messages").Set("send_due_at = NULL").Where("id IN (?)", bun.In(ids)).Exec(context.Background()); err != nil {
			b.Fatal(err)
		}
		before := readPGCounters(b, db)
		b.ResetTimer()
		for _, id := range ids {
			if err := runSendJob(e, sendAttempt{id: id, attempt: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		before.report(b, db)
	})
}

// pgCounters are the database-wide counters of pg_stat_database: run it on
// a database no one else uses (TEST_DATABASE_URL=…/send_stats) for exact
// figures. PostgreSQL flushes a backend's counters when it has been idle
// for up to 10 s, hence the waits.
type pgCounters struct{ xacts, returned, fetched, inserted, updated int64 }

const pgStatsFlush = 11 * time.Second

func readPGCounters(b *testing.B, db *store.DB) *pgCounters {
	if db.Dialect != store.Postgres || os.Getenv("PG_STATS") == "" {
		return nil
	}
	time.Sleep(pgStatsFlush)
	var c pgCounters
	if err := db.Bun.NewRaw(`SELECT xact_commit + xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated
		FROM pg_stat_database WHERE datname = current_database()`).Scan(context.Background(), &c.xacts, &c.returned, &c.fetched, &c.inserted, &c.updated); err != nil {
		b.Fatal(err)
	}
	return &c
}

// report puts the counters' growth since c per operation in the results
// (the read itself counts one transaction).
func (c *pgCounters) report(b *testing.B, db *store.DB) {
	if c == nil {
		return
	}
	d := readPGCounters(b, db)
	n := float64(b.N)
	b.ReportMetric(float64(d.xacts-c.xacts-1)/n, "xact/op")
	b.ReportMetric(float64(d.returned-c.returned)/n, "tup_returned/op")
	b.ReportMetric(float64(d.fetched-c.fetched)/n, "tup_fetched/op")
	b.ReportMetric(float64(d.inserted-c.inserted)/n, "tup_inserted/op")
	b.ReportMetric(float64(d.updated-c.updated)/n, "tup_updated/op")
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
