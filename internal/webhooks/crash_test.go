package webhooks_test

import (
	"context"
	"fmt"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// TestCrashRecovery kills `gateway serve` with SIGKILL in the middle of a
// delivery run and restarts it: every event still arrives at least once.
// Deliveries that were in flight at the kill stay "running" in River until
// the job rescuer takes them back (RescueStuckJobsAfter, one minute), so
// the test takes about 1.5 minutes; engines run in parallel.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the gateway binary; about 90 s")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, "github.com/chatmsg/gateway/cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gateway: %v\n%s", err, out)
	}

	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db, err := store.OpenSQLite(context.Background(), filepath.Join(dir, "gateway.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		crashRun(t, bin, db, []string{"DATA_DIR=" + dir}, 1)
	})
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(storetest.EnvPostgres) == "" {
			t.Skip(storetest.EnvPostgres + " not set")
		}
		t.Parallel()
		db := storetest.Postgres(t)
		var schema string
		if err := db.Bun.QueryRowContext(context.Background(), "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		url := os.Getenv(storetest.EnvPostgres)
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		// Two replicas on one database: one is killed, the other carries on.
		crashRun(t, bin, db, []string{"DATABASE_URL=" + url + sep + "search_path=" + schema}, 2)
	})
}

func crashRun(t *testing.T, bin string, db *store.DB, env []string, replicas int) {
	const total = 300
	b := setup(t, db, setupOpts{})

	var mu sync.Mutex
	seen := map[string]int{}
	requests := 0
	var secret string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(40 * time.Millisecond) // a slow receiver: the kill lands mid-run
		mu.Lock()
		defer mu.Unlock()
		if err := subscriber.Verify(secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("delivery %s: %v", r.Header.Get(webhooks.HeaderDelivery), err)
		}
		seen[r.Header.Get(webhooks.HeaderDelivery)]++
		requests++
	}))
	t.Cleanup(rcv.Close)
	count := func() (distinct, all int) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen), requests
	}

	_, sec := b.subscribe(t, b.p, webhooks.CreateInput{URL: rcv.URL + "/hook"})
	mu.Lock()
	secret = sec
	mu.Unlock()
	data := exampleData(t)[events.ContactImportCompleted]
	want := map[string]bool{}
	for range total {
		if err := b.publish(t, webhooks.Event{Name: events.ContactImportCompleted, CompanyID: b.p.CompanyID, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	// The delivery ids to expect, read from the queue (without taking them:
	// the gateway must deliver them).
	for _, d := range peekDeliveries(t, db) {
		want[d] = true
	}
	if len(want) != total {
		t.Fatalf("%d deliveries queued, want %d", len(want), total)
	}

	env = append(env, "LISTEN_ADDR=127.0.0.1:0", "OUTBOUND_ALLOW_CIDRS=127.0.0.0/8", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"CONNECTOR_DRIVER=simulator", "METRICS_LISTEN=off")
	start := func(name string) *exec.Cmd {
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), env...)
		logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_, _ = cmd.Process.Wait()
			_ = logf.Close()
			if t.Failed() {
				out, _ := os.ReadFile(logf.Name())
				t.Logf("%s log:\n%s", name, out)
			}
		})
		return cmd
	}
	waitFor := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			if time.Now().After(deadline) {
				d, n := count()
				t.Fatalf("%s: not within %s (%d distinct of %d, %d requests)", what, limit, d, total, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	victim := start("victim")
	for i := 1; i < replicas; i++ {
		start(fmt.Sprintf("replica%d", i))
	}
	waitFor("a third delivered", 60*time.Second, func() bool { d, _ := count(); return d >= total/3 })
	if err := victim.Process.Kill(); err != nil { // SIGKILL: no cleanup of any kind
		t.Fatal(err)
	}
	_, _ = victim.Process.Wait()
	atKill, _ := count()
	start("restarted")
	waitFor("every event delivered", 4*time.Minute, func() bool { d, _ := count(); return d >= total })

	mu.Lock()
	defer mu.Unlock()
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("delivery %s never arrived", id)
		}
	}
	t.Logf("%d events: %d delivered before the kill, %d requests in all (%d duplicates from attempts cut short)",
		total, atKill, requests, requests-len(seen))
}

// peekDeliveries lists the delivery ids of the queued deliveries.
func peekDeliveries(t *testing.T, db *store.DB) []string {
	t.Helper()
	var ids []string
	if err := db.Bun.NewSelect().Table("webhook_deliveries").Column("delivery_id").
		Scan(context.Background(), &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}
