package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Migration is one schema change, written once per dialect because the two
// engines differ in types (BIGSERIAL vs INTEGER PRIMARY KEY, TIMESTAMPTZ vs
// TIMESTAMP, JSONB vs TEXT). IDs sort in application order and are never
// renamed once released.
type Migration struct {
	ID       string
	SQLite   string
	Postgres string
	// SQLiteRebuild marks a SQLite script that rebuilds a table other
	// tables reference (SQLite cannot drop a table constraint: the table is
	// created anew, copied, dropped and renamed). It runs with foreign-key
	// enforcement off, as SQLite's documented procedure requires (with it
	// on, dropping the old table would cascade into every referencing
	// row), and PRAGMA foreign_key_check must find nothing before commit.
	SQLiteRebuild bool
}

// Migrate applies, in order, every migration not yet recorded. On
// PostgreSQL an advisory lock makes concurrent replicas wait for each other.
func (db *DB) Migrate(ctx context.Context, migrations []Migration) error {
	seen := map[string]bool{}
	for _, m := range migrations {
		if seen[m.ID] {
			return fmt.Errorf("migration %s listed twice", m.ID)
		}
		seen[m.ID] = true
	}
	if db.Dialect == SQLite {
		rebuild, err := db.pendingRebuild(ctx, migrations)
		if err != nil {
			return err
		}
		if rebuild {
			return db.migrateForeignKeysOff(ctx, migrations)
		}
	}
	if db.Dialect == Postgres {
		return db.migrateOneByOne(ctx, migrations)
	}
	return db.InTx(ctx, func(ctx context.Context, tx *Tx) error {
		return applyMigrations(ctx, db.Dialect, tx, migrations)
	})
}

// applyMigrations applies, inside tx, every migration not yet recorded.
func applyMigrations(ctx context.Context, dialect Dialect, tx bun.IDB, migrations []Migration) error {
	if dialect == Postgres {
		// Transaction-scoped: released at commit or rollback.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7263544901)"); err != nil {
			return fmt.Errorf("migration lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (id VARCHAR(200) PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var applied []string
	if err := tx.NewSelect().Table("schema_migrations").Column("id").Scan(ctx, &applied); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	done := map[string]bool{}
	for _, id := range applied {
		done[id] = true
	}
	for _, m := range migrations {
		if done[m.ID] {
			continue
		}
		script := m.SQLite
		if dialect == Postgres {
			script = m.Postgres
		}
		for _, stmt := range splitStatements(script) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", m.ID, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)", m.ID, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("record migration %s: %w", m.ID, err)
		}
	}
	return nil
}

// pendingRebuild reports whether a migration not yet applied rebuilds a
// table (SQLiteRebuild).
func (db *DB) pendingRebuild(ctx context.Context, migrations []Migration) (bool, error) {
	if _, err := db.Bun.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (id VARCHAR(200) PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)`); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	var applied []string
	if err := db.Bun.NewSelect().Table("schema_migrations").Column("id").Scan(ctx, &applied); err != nil {
		return false, fmt.Errorf("read schema_migrations: %w", err)
	}
	done := map[string]bool{}
	for _, id := range applied {
		done[id] = true
	}
	for _, m := range migrations {
		if m.SQLiteRebuild && !done[m.ID] {
			return true, nil
		}
	}
	return false, nil
}

// migrateForeignKeysOff applies the pending migrations in one transaction
// on one connection whose foreign-key enforcement is off (PRAGMA
// foreign_keys is a no-op inside a transaction, so it is set before BEGIN
// and restored after), checking every foreign key before the commit.
func (db *DB) migrateForeignKeysOff(ctx context.Context, migrations []Migration) (err error) {
	conn, err := db.Bun.Conn(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("foreign keys off: %w", err)
	}
	defer func() {
		if _, onErr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON"); onErr != nil {
			err = errors.Join(err, fmt.Errorf("foreign keys on: %w", onErr))
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := applyMigrations(ctx, SQLite, tx, migrations); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	var violations int
	if err := tx.NewRaw("SELECT COUNT(*) FROM pragma_foreign_key_check").Scan(ctx, &violations); err != nil {
		return errors.Join(fmt.Errorf("foreign key check: %w", err), tx.Rollback())
	}
	if violations > 0 {
		return errors.Join(fmt.Errorf("migrations left %d rows whose foreign keys point nowhere", violations), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// splitStatements splits a script on semicolons that end a line; migration
// scripts keep one statement per terminated line group and never put a
// semicolon at a line end inside a literal.
func splitStatements(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(script, "\n") {
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			if s := strings.TrimSpace(cur.String()); s != ";" {
				out = append(out, s)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
