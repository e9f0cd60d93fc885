package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

var testMigrations = []store.Migration{{
	ID:       "0001_things",
	SQLite:   "CREATE TABLE things (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);",
	Postgres: "CREATE TABLE things (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE);",
}}

func count(t *testing.T, db *store.DB) int {
	t.Helper()
	n, err := db.Bun.NewSelect().Table("things").Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestUnitOfWork(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.Migrate(ctx, testMigrations); err != nil {
			t.Fatal(err)
		}
		// A second run applies nothing and fails nothing.
		if err := db.Migrate(ctx, testMigrations); err != nil {
			t.Fatalf("re-running migrations: %v", err)
		}

		boom := errors.New("boom")
		err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO things (name) VALUES (?)", "rolled back"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || count(t, db) != 0 {
			t.Fatalf("rollback: err=%v rows=%d", err, count(t, db))
		}

		func() {
			defer func() { _ = recover() }()
			_ = db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				_, _ = tx.ExecContext(ctx, "INSERT INTO things (name) VALUES (?)", "panicked")
				panic("boom")
			})
		}()
		if count(t, db) != 0 {
			t.Fatal("a panicking unit of work committed")
		}

		if err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO things (name) VALUES (?)", "kept")
			return err
		}); err != nil || count(t, db) != 1 {
			t.Fatalf("commit: err=%v rows=%d", err, count(t, db))
		}

		_, err = db.Bun.ExecContext(ctx, "INSERT INTO things (name) VALUES (?)", "kept")
		if !store.IsUniqueViolation(err) {
			t.Fatalf("duplicate insert: %v is not reported as a unique violation", err)
		}
		if err := db.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMigrationRefusesDuplicateIDs(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	err := db.Migrate(context.Background(), append(testMigrations, testMigrations...))
	if err == nil {
		t.Fatal("duplicate migration ids were accepted")
	}
}

func TestPageLastPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ total, per, want int }{{0, 20, 1}, {1, 20, 1}, {20, 20, 1}, {21, 20, 2}, {500, 100, 5}} {
		if got := (store.Page{Number: 1, PerPage: tc.per}).LastPage(tc.total); got != tc.want {
			t.Errorf("LastPage(total=%d, per=%d) = %d, want %d", tc.total, tc.per, got, tc.want)
		}
	}
}

// TestBunStatementsAreNotPrepared: on PostgreSQL, bun's statements (every
// value inlined, so nearly every one is new text) run unprepared, while
// pgx statements with parameters (River's) are still prepared and cached
// on the same connection.
func TestBunStatementsAreNotPrepared(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	ctx := context.Background()
	conn, err := db.Bun.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prepared := func() int {
		t.Helper()
		var n int
		if err := conn.NewRaw("SELECT count(*) FROM pg_prepared_statements").Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, v := range []string{"a", "b"} {
		var got string
		if err := conn.NewRaw("SELECT ?::text", v).Scan(ctx, &got); err != nil || got != v {
			t.Fatalf("select %q: %q %v", v, got, err)
		}
	}
	if n := prepared(); n != 0 {
		t.Fatalf("%d statements prepared by bun's queries, want 0", n)
	}
	if err := conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ PgxConn() *pgx.Conn })
		if !ok {
			t.Fatalf("driver connection %T", dc)
		}
		var n int
		return pc.PgxConn().QueryRow(ctx, "SELECT $1::int", 7).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n := prepared(); n != 1 {
		t.Fatalf("%d statements prepared after a parameterised pgx query, want 1", n)
	}
}

func TestCheckOrder(t *testing.T) {
	m := func(ids ...string) []store.Migration {
		var out []store.Migration
		for _, id := range ids {
			out = append(out, store.Migration{ID: id})
		}
		return out
	}
	cases := []struct {
		name    string
		list    []store.Migration
		wantErr string
	}{
		{"ordered", m("0001_a", "0002_b", "0010_c"), ""},
		{"empty", nil, ""},
		{"listed twice", m("0001_a", "0001_a"), "listed after"},
		{"out of order", m("0002_b", "0001_a"), "listed after"},
		{"same number", m("0002_b", "0002_a"), "listed after"},
		{"no number", m("auth"), "not NNNN_name"},
		{"date as number", m("20261127_filestore"), "not NNNN_name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := store.CheckOrder(c.list)
			if c.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}
