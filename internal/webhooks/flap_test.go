package webhooks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// TestDeliveryLogSurvivesDatabaseFlaps terminates the gateway's PostgreSQL
// backends again and again while deliveries run: every event still
// arrives, and every delivery the receiver got has its log entry (issue
// 10.9). Only this test's own connections are terminated (they carry their
// own application_name): other tests share the server.
func TestDeliveryLogSurvivesDatabaseFlaps(t *testing.T) {
	if os.Getenv(storetest.EnvPostgres) == "" {
		t.Skip(storetest.EnvPostgres + " not set")
	}
	t.Parallel()
	ctx := context.Background()
	admin := storetest.Postgres(t)
	var schema string
	if err := admin.Bun.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	appName := fmt.Sprintf("webhooks_flap_%d", time.Now().UnixNano())
	url := os.Getenv(storetest.EnvPostgres)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db, err := store.OpenPostgres(ctx, url+sep+"application_name="+appName, store.Options{SearchPath: schema, MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := setup(t, db, setupOpts{work: true, webhooks: webhooks.Options{Now: time.Now}})

	const total = 300
	var mu sync.Mutex
	seen := map[string]int{}
	var secret string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(2 * time.Millisecond) // the flaps land mid-run
		mu.Lock()
		defer mu.Unlock()
		if err := subscriber.Verify(secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("delivery %s: %v", r.Header.Get(webhooks.HeaderDelivery), err)
		}
		seen[r.Header.Get(webhooks.HeaderDelivery)]++
	}))
	t.Cleanup(rcv.Close)
	sub, sec := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL + "/hook"})
	mu.Lock()
	secret = sec
	mu.Unlock()
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }

	data := exampleData(t)[events.ContactImportCompleted]
	terminated := 0
	for i := range total {
		// Publishing goes through the admin pool: the outbox is not what is
		// under test, the delivery path is.
		if err := admin.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			return b.svc.Publish(ctx, tx, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: b.p.CompanyID, Data: data})
		}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			var n int
			if err := admin.Bun.QueryRowContext(ctx,
				"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = ?", appName).Scan(&n); err != nil {
				t.Fatal(err)
			}
			terminated += n
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil(t, "every event delivered", func() bool { return received() == total })

	// Every delivery that arrived has a successful log entry.
	var logged []string
	waitUntil(t, "every delivery logged", func() bool {
		logged = logged[:0]
		if err := admin.Bun.NewSelect().Table("webhook_delivery_log").ColumnExpr("DISTINCT delivery_id::text").
			Where("subscription_id = ?", sub.ID).Where("succeeded").Scan(ctx, &logged); err != nil {
			t.Fatal(err)
		}
		return len(logged) >= total
	})
	mu.Lock()
	defer mu.Unlock()
	have := map[string]bool{}
	for _, id := range logged {
		have[id] = true
	}
	for id := range seen {
		if !have[id] {
			t.Errorf("delivery %s arrived but has no log entry", id)
		}
	}
	if terminated == 0 {
		t.Error("no backend was terminated: the test tested nothing")
	}
	t.Logf("%d events, %d backends terminated, %d duplicates", total, terminated, func() int {
		d := 0
		for _, n := range seen {
			d += n - 1
		}
		return d
	}())
}
