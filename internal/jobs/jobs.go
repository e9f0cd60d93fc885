// Package jobs runs background work on River in the service's own database:
// capabilities register their workers and periodic jobs here, and insert jobs
// inside their store transactions so a job exists exactly when the data it
// acts on was committed.
package jobs

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/chatmsg/gateway/internal/store"
)

// Options configure the runner.
type Options struct {
	// Workers are the job handlers; nil builds a runner that only inserts
	// (River refuses to work jobs without at least one worker).
	Workers  *river.Workers
	Periodic []*river.PeriodicJob
	// Queues maps queue names to their worker counts; default is the
	// default queue with 50 workers.
	Queues map[string]river.QueueConfig
	Logger *slog.Logger
	// FetchPollInterval bounds how long a new job can wait to be picked up
	// when notifications are not available (SQLite, or PollOnly).
	FetchPollInterval time.Duration
	// FetchCooldown is the least time between two fetches of a queue that
	// does not set its own (default FetchCooldown below).
	FetchCooldown time.Duration
	// InsertOnly builds a client that inserts jobs but never works them
	// (admin commands).
	InsertOnly bool
	// RescueStuckJobsAfter is how long a job may stay running before the
	// leader treats it as stuck (its process died) and schedules it again;
	// River's default is one hour. River also waits for the job's own
	// worker Timeout, so a short value never cuts off a long-running job.
	RescueStuckJobsAfter time.Duration
}

// FetchCooldown is the default least time between two fetches of a queue.
// A queue works at most MaxWorkers jobs per fetch, so River's 100 ms caps
// it at 10 × MaxWorkers jobs a second whatever the jobs cost: 160 queued
// sends a second with the default 16 workers, measured as the drain rate
// under the queued-send load while 550 a second were accepted. A busy
// queue now fetches up to 50 times a second (one statement each); an idle
// one waits for an insert's notification or the poll as before.
const FetchCooldown = 20 * time.Millisecond

// Runner is the River client of whichever driver the database uses.
type Runner struct {
	working bool
	pg      *river.Client[pgx.Tx]
	lite    *river.Client[*sql.Tx]
	// stopping closes when Stop begins, so long-running workers (webhook
	// lanes) can wind down instead of holding the soft stop for their
	// whole run.
	stopping  chan struct{}
	closeOnce sync.Once
}

// Migrate applies River's own migrations to db.
func Migrate(ctx context.Context, db *store.DB) error {
	var err error
	if db.Dialect == store.Postgres {
		var m *rivermigrate.Migrator[pgx.Tx]
		if m, err = rivermigrate.New(riverpgxv5.New(db.Pool), nil); err == nil {
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
	} else {
		var m *rivermigrate.Migrator[*sql.Tx]
		if m, err = rivermigrate.New(riversqlite.New(db.Bun.DB), nil); err == nil {
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
	}
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

// New builds a runner over db.
func New(db *store.DB, opts Options) (*Runner, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg := &river.Config{
		Logger:       newRiverLogger(logger),
		PeriodicJobs: opts.Periodic,
		// Completed jobs are bookkeeping only; the delivery log and message
		// tables hold what users read.
		CompletedJobRetentionPeriod: time.Hour,
		FetchPollInterval:           opts.FetchPollInterval,
		FetchCooldown:               cmp.Or(opts.FetchCooldown, FetchCooldown),
		RescueStuckJobsAfter:        opts.RescueStuckJobsAfter,
	}
	if cfg.FetchPollInterval > 0 && cfg.FetchPollInterval < cfg.FetchCooldown {
		cfg.FetchCooldown = cfg.FetchPollInterval // River wants the poll no shorter
	}
	r := &Runner{working: !opts.InsertOnly && opts.Workers != nil, stopping: make(chan struct{})}
	if r.working {
		cfg.Workers = opts.Workers
		cfg.Queues = opts.Queues
		if cfg.Queues == nil {
			cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 50}}
		}
	} else {
		cfg.Workers = opts.Workers // lets inserts validate job kinds
	}
	var err error
	if db.Dialect == store.Postgres {
		r.pg, err = river.NewClient(riverpgxv5.New(db.Pool), cfg)
	} else {
		// SQLite has no LISTEN/NOTIFY: poll, often, since fetching is cheap
		// on a local file.
		cfg.PollOnly = true
		if cfg.FetchPollInterval == 0 {
			cfg.FetchPollInterval = 100 * time.Millisecond
		}
		r.lite, err = river.NewClient(riversqlite.New(db.Bun.DB), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return r, nil
}

// Insert adds a job inside tx: it runs only if tx commits.
func (r *Runner) Insert(ctx context.Context, tx *store.Tx, args river.JobArgs, opts *river.InsertOpts) error {
	return r.InsertMany(ctx, tx, []river.InsertManyParams{{Args: args, InsertOpts: opts}})
}

// InsertMany adds several jobs inside tx.
func (r *Runner) InsertMany(ctx context.Context, tx *store.Tx, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	var err error
	switch dtx := tx.DriverTx.(type) {
	case pgx.Tx:
		if r.pg == nil {
			return errors.New("jobs: postgres transaction given to a sqlite runner")
		}
		_, err = r.pg.InsertManyTx(ctx, dtx, params)
	case *sql.Tx:
		if r.lite == nil {
			return errors.New("jobs: sqlite transaction given to a postgres runner")
		}
		_, err = r.lite.InsertManyTx(ctx, dtx, params)
	default:
		return fmt.Errorf("jobs: unsupported transaction %T", tx.DriverTx)
	}
	if err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	return nil
}

// CompleteTx marks a running job completed inside tx, so the job's outcome
// commits (or rolls back) together with what the worker wrote. Call it from
// the job's Work: River finds its client in the worker's context.
func CompleteTx[T river.JobArgs](ctx context.Context, tx *store.Tx, job *river.Job[T]) error {
	var err error
	switch dtx := tx.DriverTx.(type) {
	case pgx.Tx:
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, dtx, job)
	case *sql.Tx:
		_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, dtx, job)
	default:
		return fmt.Errorf("jobs: unsupported transaction %T", tx.DriverTx)
	}
	if err != nil {
		return fmt.Errorf("complete job %d: %w", job.ID, err)
	}
	return nil
}

// Start begins working jobs until ctx ends or Stop is called.
func (r *Runner) Start(ctx context.Context) error {
	if !r.working {
		return nil
	}
	if r.pg != nil {
		return r.pg.Start(ctx)
	}
	return r.lite.Start(ctx)
}

// Stopping is closed when Stop begins.
func (r *Runner) Stopping() <-chan struct{} { return r.stopping }

// Stop waits for running jobs to finish (bounded by ctx), then returns.
func (r *Runner) Stop(ctx context.Context) error {
	r.closeOnce.Do(func() { close(r.stopping) })
	if !r.working {
		return nil
	}
	if r.pg != nil {
		return r.pg.Stop(ctx)
	}
	return r.lite.Stop(ctx)
}
