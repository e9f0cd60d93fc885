// Package storetest opens fresh databases for tests: a SQLite file always,
// and a PostgreSQL schema of its own when TEST_DATABASE_URL is set, so every
// repository and API test runs against both engines.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// poolSize is the PostgreSQL pool of one test database. Tests run in
// parallel across packages (go test -p) and within them (t.Parallel), and
// the suite must pass on a stock server (max_connections 100): a test's
// requests and its River client share these few connections.
const poolSize = 4

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
	// The schema is made and dropped on short-lived connections, so a test
	// holds no connection beyond its pool.
	if err := adminExec(ctx, url, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	var db *store.DB
	err := retryTooManyClients(ctx, func() (err error) {
		db, err = store.OpenPostgres(ctx, url, store.Options{SearchPath: schema, MaxConns: poolSize})
		return err
	})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		if err := adminExec(context.Background(), url, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return db
}

// adminExec runs one statement on a connection of its own.
func adminExec(ctx context.Context, url, sql string) error {
	return retryTooManyClients(ctx, func() error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return err
	})
}

// retryTooManyClients runs connect again while the server answers "too many
// clients" (SQLSTATE 53300), backing off from 50 ms to 2 s, for at most
// connectPatience: a busy CI server makes a test wait, not fail.
func retryTooManyClients(ctx context.Context, connect func() error) error {
	const connectPatience = time.Minute
	deadline := time.Now().Add(connectPatience)
	pause := 50 * time.Millisecond
	for {
		err := connect()
		if err == nil || !store.IsTooManyClients(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}
