package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Migration is one schema change, written once per dialect because the two
// engines differ in types (BIGSERIAL vs INTEGER PRIMARY KEY, TIMESTAMPTZ vs
// TIMESTAMP, JSONB vs TEXT). IDs sort in application order and are never
// renamed once released.
type Migration struct {
	ID       string
	SQLite   string
	Postgres string
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
	return db.InTx(ctx, func(ctx context.Context, tx *Tx) error {
		if db.Dialect == Postgres {
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
			if db.Dialect == Postgres {
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
	})
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
