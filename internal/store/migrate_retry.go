package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// migrateOneByOne applies each migration in a transaction of its own (each
// taking the advisory lock and reading schema_migrations again), each run
// again while PostgreSQL ends it as a deadlock's victim. During a rolling
// upgrade old replicas keep writing while a new one migrates: one
// transaction for every pending migration would hold the locks of the
// first ones (ALTER TABLE takes ACCESS EXCLUSIVE) until the last, and meet
// the old replicas' writes in the other lock order (the cluster suite saw
// it: 0076 adding a trigger to contact_channels while earlier migrations'
// locks were still held).
//
// What was applied is read once first, without the lock, so a replica that
// starts on an up-to-date schema opens no transaction at all, and one that
// finds some pending opens one per pending migration; each of those reads
// the table again under the lock, so two replicas starting at once still
// apply each migration once.
func (db *DB) migrateOneByOne(ctx context.Context, migrations []Migration) error {
	done, err := db.appliedOutsideLock(ctx)
	if err != nil {
		return err
	}
	for i, m := range migrations {
		if done[m.ID] {
			continue
		}
		err := retryMigration(ctx, func() error {
			return db.InTx(ctx, func(ctx context.Context, tx *Tx) error {
				return applyMigrations(ctx, db.Dialect, tx, migrations[:i+1])
			})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// migrateAttempts bounds the retries of a migration PostgreSQL chose as
// a deadlock's victim.
const migrateAttempts = 5

// retryMigration runs apply again while PostgreSQL ends it as a deadlock's
// victim (40P01) or for a serialization failure (40001): a new replica
// migrates while old replicas keep writing (a rolling upgrade), and a
// migration that adds a trigger or an index to a busy table can meet their
// transactions in the other lock order. The migration's transaction rolled
// back whole, so running it again is safe; the old replicas' transactions
// are short, so a later attempt gets its locks.
func retryMigration(ctx context.Context, apply func() error) error {
	var err error
	for attempt := 1; ; attempt++ {
		if err = apply(); err == nil || attempt == migrateAttempts || !lockConflict(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

func lockConflict(err error) bool {
	var state interface{ SQLState() string }
	if !errors.As(err, &state) {
		return false
	}
	switch state.SQLState() {
	case "40P01", "40001":
		return true
	}
	return false
}

// appliedOutsideLock is the ids schema_migrations held when read, none when
// the table does not exist yet (PostgreSQL).
func (db *DB) appliedOutsideLock(ctx context.Context) (map[string]bool, error) {
	var exists bool
	if err := db.Bun.NewRaw("SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(ctx, &exists); err != nil {
		return nil, fmt.Errorf("look for schema_migrations: %w", err)
	}
	if !exists {
		return map[string]bool{}, nil
	}
	return appliedIDs(ctx, db.Bun)
}
