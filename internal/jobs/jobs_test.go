package jobs_test

import (
	"context"
	"errors"
	"testing"

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
