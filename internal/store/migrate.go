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
// TIMESTAMP, JSONB vs TEXT).
//
// IDs are "NNNN_name": unique, and their order is the order of application,
// which Migrate enforces. A new migration takes the next number after the
// highest one of every capability, so a database upgraded release by release
// applies them in the same order as a fresh one.
type Migration struct {
	ID string
	// Was is the id the migration was released under before ids were made
	// unique and ordered. A database that recorded Was counts the migration
	// as applied, and applying it records both ids, so that a replica of the
	// previous release sharing the schema during a rolling deploy still sees
	// its own ids and does not apply them a second time.
	Was      string
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
	if err := CheckOrder(migrations); err != nil {
		return err
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
	done, err := appliedIDs(ctx, tx)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for _, m := range migrations {
		if done[m.ID] {
			continue
		}
		if m.Was != "" && done[m.Was] {
			if err := record(ctx, tx, m.ID, now); err != nil {
				return err
			}
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
		if err := record(ctx, tx, m.ID, now); err != nil {
			return err
		}
		if m.Was != "" {
			if err := record(ctx, tx, m.Was, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckOrder fails unless every id is "NNNN_name" and each sorts after the
// one before it, so the list's order, the ids' order and the order of
// application are one and the same.
func CheckOrder(migrations []Migration) error {
	prev := ""
	for _, m := range migrations {
		if len(m.ID) < 6 || m.ID[4] != '_' || strings.Trim(m.ID[:4], "0123456789") != "" {
			return fmt.Errorf("migration id %q is not NNNN_name", m.ID)
		}
		if m.ID <= prev {
			return fmt.Errorf("migration %s is listed after %s: ids must be unique and in order of application", m.ID, prev)
		}
		prev = m.ID
	}
	return nil
}

func appliedIDs(ctx context.Context, tx bun.IDB) (map[string]bool, error) {
	var applied []string
	if err := tx.NewSelect().Table("schema_migrations").Column("id").Scan(ctx, &applied); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	done := make(map[string]bool, len(applied))
	for _, id := range applied {
		done[id] = true
	}
	return done, nil
}

func record(ctx context.Context, tx bun.IDB, id, at string) error {
	if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (id, applied_at) VALUES (?, ?)", id, at); err != nil {
		return fmt.Errorf("record migration %s: %w", id, err)
	}
	return nil
}

// pendingRebuild reports whether a migration not yet applied rebuilds a
// table (SQLiteRebuild).
func (db *DB) pendingRebuild(ctx context.Context, migrations []Migration) (bool, error) {
	if _, err := db.Bun.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (id VARCHAR(200) PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)`); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	done, err := appliedIDs(ctx, db.Bun)
	if err != nil {
		return false, err
	}
	for _, m := range migrations {
		if m.SQLiteRebuild && !done[m.ID] && (m.Was == "" || !done[m.Was]) {
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
