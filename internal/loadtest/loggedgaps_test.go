package loadtest

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestLoggedGaps reads retries from delivery-log rows shaped as the
// gateway writes them, in a schema of its own: the gap of attempt n runs
// from attempt n-1's entry to attempt n's start (its entry less its
// duration); other companies' rows and attempts with a hole before them
// are not counted.
func TestLoggedGaps(t *testing.T) {
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set (the check reads PostgreSQL)")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("loggedgaps_%d", time.Now().UnixNano())
	for _, q := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".webhook_subscriptions (id BIGINT PRIMARY KEY, company_id BIGINT NOT NULL)",
		"CREATE TABLE " + schema + ".webhook_delivery_log (subscription_id BIGINT, delivery_id TEXT, attempt INT, created_at TIMESTAMPTZ, duration_ms BIGINT)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	rows := []struct {
		sub      int64
		delivery string
		attempt  int
		at       time.Duration // after t0
		ms       int64
	}{
		{1, "a", 1, 10 * time.Second, 10000}, // timed out
		{1, "a", 2, 20 * time.Second, 0},     // refused 10 s later
		{1, "a", 3, 81 * time.Second, 500},   // sent 60.5 s later
		{1, "b", 1, 0, 3},
		{1, "b", 3, 80 * time.Second, 0}, // attempt 2 missing: no gap
		{2, "c", 1, 0, 0},                // another company's
		{2, "c", 2, 10 * time.Second, 0},
	}
	for _, r := range rows {
		if _, err := conn.Exec(ctx, "INSERT INTO "+schema+".webhook_delivery_log VALUES ($1, $2, $3, $4, $5)",
			r.sub, r.delivery, r.attempt, t0.Add(r.at), r.ms); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+schema+".webhook_subscriptions VALUES (1, 7), (2, 8)"); err != nil {
		t.Fatal(err)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	got, err := LoggedGaps(ctx, u.String(), []int64{7})
	if err != nil {
		t.Fatal(err)
	}
	want := []AttemptGap{{Attempt: 2, Gap: 10 * time.Second}, {Attempt: 3, Gap: 60500 * time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Errorf("gaps %v, want %v", got, want)
	}
}
