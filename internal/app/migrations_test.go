package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestMigrationPaths checks that the three ways a database reaches the
// current schema end in the same schema: all at once (a fresh install),
// one migration per run (an install upgraded release by release), and a
// database of the release before ids were renumbered (its schema_migrations
// holds the old ids, recorded as Migration.Was), which must apply nothing
// again and record the new ids beside the old ones.
func TestMigrationPaths(t *testing.T) {
	all := app.Migrations()
	if err := store.CheckOrder(all); err != nil {
		t.Fatal(err)
	}
	engines := []struct {
		name string
		open func(testing.TB) *store.DB
	}{
		{"sqlite", storetest.SQLite},
		{"postgres", storetest.Postgres},
	}
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			ctx := context.Background()
			fresh := engine.open(t)
			if err := fresh.Migrate(ctx, all); err != nil {
				t.Fatalf("fresh: %v", err)
			}
			want := dumpSchema(t, fresh)

			paths := []struct {
				name    string
				migrate func(t *testing.T, db *store.DB)
			}{
				{"step by step", func(t *testing.T, db *store.DB) {
					for i := range all {
						if err := db.Migrate(ctx, all[:i+1]); err != nil {
							t.Fatalf("step %d (%s): %v", i+1, all[i].ID, err)
						}
					}
				}},
				{"from the ids before renumbering", func(t *testing.T, db *store.DB) {
					if err := db.Migrate(ctx, all); err != nil {
						t.Fatal(err)
					}
					// Rewrite the record as the previous release left it.
					for _, m := range all {
						if m.Was == "" {
							continue
						}
						if _, err := db.Bun.ExecContext(ctx, "DELETE FROM schema_migrations WHERE id = ?", m.ID); err != nil {
							t.Fatal(err)
						}
					}
					// Applying a migration a second time fails (its tables
					// exist), so success means nothing ran again.
					if err := db.Migrate(ctx, all); err != nil {
						t.Fatalf("upgrade from the old ids: %v", err)
					}
					var ids []string
					if err := db.Bun.NewSelect().Table("schema_migrations").Column("id").Scan(ctx, &ids); err != nil {
						t.Fatal(err)
					}
					for _, m := range all {
						if !slices.Contains(ids, m.ID) || (m.Was != "" && !slices.Contains(ids, m.Was)) {
							t.Errorf("schema_migrations lacks %s (was %q)", m.ID, m.Was)
						}
					}
				}},
			}
			for _, path := range paths {
				t.Run(path.name, func(t *testing.T) {
					db := engine.open(t)
					path.migrate(t, db)
					if got := dumpSchema(t, db); got != want {
						t.Errorf("schema differs from a fresh one:\n%s", diffLines(want, got))
					}
				})
			}
		})
	}
}

// dumpSchema renders the database's tables, columns, indexes, constraints,
// triggers and functions as sorted text, with the test schema's name left
// out so two PostgreSQL schemas compare equal.
func dumpSchema(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	var queries []string
	if db.Dialect == store.SQLite {
		queries = []string{`SELECT type || ' ' || name || ' ON ' || tbl_name || ': ' || COALESCE(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations'`}
	} else {
		queries = []string{
			`SELECT 'column ' || table_name || '.' || column_name || ' #' || ordinal_position || ' ' || data_type || ' null=' || is_nullable || ' default=' || COALESCE(column_default, '') FROM information_schema.columns WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'`,
			`SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()`,
			`SELECT 'constraint ' || conrelid::regclass::text || '.' || conname || ': ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = current_schema()::regnamespace`,
			`SELECT 'trigger ' || event_object_table || '.' || trigger_name || ' ' || action_timing || ' ' || event_manipulation || ': ' || action_statement FROM information_schema.triggers WHERE trigger_schema = current_schema()`,
			`SELECT 'function ' || proname || ': ' || md5(prosrc) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace`,
		}
	}
	var lines []string
	for _, q := range queries {
		var rows []string
		if err := db.Bun.NewRaw(q).Scan(ctx, &rows); err != nil {
			t.Fatalf("dump schema: %v", err)
		}
		lines = append(lines, rows...)
	}
	if db.Dialect == store.Postgres {
		var schema string
		if err := db.Bun.NewRaw("SELECT current_schema()").Scan(ctx, &schema); err != nil {
			t.Fatal(err)
		}
		for i := range lines {
			lines[i] = strings.ReplaceAll(lines[i], schema+".", "")
		}
	}
	slices.Sort(lines)
	if len(lines) < 20 {
		t.Fatalf("schema dump has %d lines; the query found nothing", len(lines))
	}
	return strings.Join(lines, "\n")
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
