// Package storetest opens fresh databases for tests: a SQLite file always,
// and a PostgreSQL schema of its own when TEST_DATABASE_URL is set, so every
// repository and API test runs against both engines.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/chatmsg/gateway/internal/store"
)

// EnvPostgres names the variable that enables the PostgreSQL runs.
const EnvPostgres = "TEST_DATABASE_URL"

// Each runs fn as a subtest per available engine ("sqlite", "postgres"),
// each with a fresh, empty database that is removed afterwards.
func Each(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	if os.Getenv(EnvPostgres) != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
	}
}

// SQLite opens a new SQLite database in the test's temp dir.
func SQLite(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Postgres opens the database at TEST_DATABASE_URL pinned to a new schema
// that is dropped when the test ends. It skips the test when the variable
// is unset.
func Postgres(t testing.TB) *store.DB {
	t.Helper()
	url := os.Getenv(EnvPostgres)
	if url == "" {
		t.Skip(EnvPostgres + " not set")
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect postgres: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	db, err := store.OpenPostgres(ctx, url, store.Options{SearchPath: schema, MaxConns: 10})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close(context.Background())
	})
	return db
}
