package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/chatmsg/gateway/internal/jobs"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

type probeArgs struct{ N int }

func (probeArgs) Kind() string { return "probe" }

type probeWorker struct {
	river.WorkerDefaults[probeArgs]
}

func (probeWorker) Work(context.Context, *river.Job[probeArgs]) error { return nil }

// Jobs inserted in a unit of work exist exactly when it commits: the
// outbox property every capability relies on.
func TestInsertFollowsTheTransaction(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, probeWorker{})
		r, err := jobs.New(db, jobs.Options{Workers: workers, InsertOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if err := r.Insert(ctx, tx, probeArgs{N: 1}, nil); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			return r.InsertMany(ctx, tx, []river.InsertManyParams{{Args: probeArgs{N: 2}}, {Args: probeArgs{N: 3}}})
		}); err != nil {
			t.Fatal(err)
		}
		n, err := db.Bun.NewSelect().Table("river_job").Where("kind = ?", "probe").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Fatalf("river_job has %d probe jobs, want 2 (the rolled-back one must not exist)", n)
		}
	})
}

// selfCompleting completes its job inside a transaction of its own and then
// fails: the job ends completed, because the completion committed with the
// worker's transaction, not with River's bookkeeping of the error.
type selfCompleting struct {
	river.WorkerDefaults[probeArgs]
	db  *store.DB
	ran chan struct{}
}

func (w *selfCompleting) Work(ctx context.Context, job *river.Job[probeArgs]) error {
	defer close(w.ran)
	if err := w.db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return jobs.CompleteTx(ctx, tx, job) }); err != nil {
		return err
	}
	return errors.New("after the completion")
}

func TestCompleteTxAndStopping(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		w := &selfCompleting{db: db, ran: make(chan struct{})}
		workers := river.NewWorkers()
		river.AddWorker(workers, w)
		r, err := jobs.New(db, jobs.Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return r.Insert(ctx, tx, probeArgs{N: 1}, nil) }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.ran:
		case <-time.After(time.Minute):
			t.Fatal("the job did not run")
		}
		select {
		case <-r.Stopping():
			t.Fatal("Stopping closed before Stop")
		default:
		}
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.Stopping():
		default:
			t.Fatal("Stopping still open after Stop")
		}
		var state string
		if err := db.Bun.NewSelect().Table("river_job").Column("state").Where("kind = ?", "probe").Scan(ctx, &state); err != nil {
			t.Fatal(err)
		}
		if state != "completed" {
			t.Errorf("job %s, want completed", state)
		}
	})
}

// A running client logs none of River's routine lines at INFO, on either
// engine: they reach the log at DEBUG only.
func TestRiverLogsRoutineAtDebug(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := jobs.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		var buf syncBuffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		w := &selfCompleting{db: db, ran: make(chan struct{})}
		workers := river.NewWorkers()
		river.AddWorker(workers, w)
		r, err := jobs.New(db, jobs.Options{Workers: workers, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error { return r.Insert(ctx, tx, probeArgs{N: 1}, nil) }); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.ran:
		case <-time.After(time.Minute):
			t.Fatal("the job did not run")
		}
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
		routine := []string{"Producer job counts", "Ran successfully", "poll only mode"}
		seen := map[string]bool{}
		for _, raw := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var line struct {
				Level, Msg, Component string
			}
			if err := json.Unmarshal(raw, &line); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			if line.Component != "river" {
				continue
			}
			seen[line.Level] = true
			for _, m := range routine {
				if strings.Contains(line.Msg, m) && line.Level != "DEBUG" {
					t.Errorf("routine line at %s: %s", line.Level, raw)
				}
			}
		}
		if !seen["INFO"] {
			t.Errorf("no River line at INFO (its start and stop belong there): %s", buf.String())
		}
	})
}

// syncBuffer is a bytes.Buffer River's goroutines can write to at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }
