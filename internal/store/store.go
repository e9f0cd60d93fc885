// Package store is the database plumbing shared by every capability: it
// opens the embedded SQLite file or PostgreSQL, runs the capabilities'
// migrations, and runs units of work in which bun queries and River job
// inserts commit together. It holds nothing domain-specific: each capability
// owns its tables and its repository code.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect names the database engine behind a DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is an open database.
type DB struct {
	Bun     *bun.DB
	Dialect Dialect
	// Pool is the pgx pool on PostgreSQL (River's driver uses it); nil on SQLite.
	Pool *pgxpool.Pool
}

// Options tune Open.
type Options struct {
	// SearchPath, on PostgreSQL, pins every connection to one schema (tests
	// use a schema per test).
	SearchPath string
	// MaxConns bounds the PostgreSQL pool (default 20; DB_MAX_CONNS in
	// production, a handful in tests).
	MaxConns int32
}

// OpenSQLite opens (creating when needed) the SQLite database at path with
// WAL journaling. SQLite allows one writer at a time and River's driver
// recommends a single connection, so the pool has exactly one: every query
// in a unit of work must go through its Tx, never through DB.Bun, or it will
// wait for itself.
func OpenSQLite(ctx context.Context, path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate&_time_format=sqlite"
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqldb.SetMaxOpenConns(1)
	sqldb.SetMaxIdleConns(1)
	sqldb.SetConnMaxLifetime(0)
	if err := sqldb.PingContext(ctx); err != nil {
		_ = sqldb.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &DB{Bun: bun.NewDB(sqldb, sqlitedialect.New()), Dialect: SQLite}, nil
}

// OpenPostgres opens a pgx pool for url; bun runs over the same pool through
// pgx's database/sql adapter so both share connections.
func OpenPostgres(ctx context.Context, url string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if opts.SearchPath != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.SearchPath
	}
	cfg.MaxConns = 20
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	sqldb := sql.OpenDB(unpreparedConnector{stdlib.GetPoolConnector(pool)})
	return &DB{Bun: bun.NewDB(sqldb, pgdialect.New()), Dialect: Postgres, Pool: pool}, nil
}

// unpreparedConnector hands database/sql (bun) connections that run
// argument-less statements unprepared. bun inlines every value into the
// SQL text, so nearly every statement it sends is new: in pgx's default
// mode (QueryExecModeCacheStatement) each one would first be prepared
// (a Parse/Describe round trip, then the execution: two round trips
// instead of one), kept in a per-connection cache of 512 on both sides
// and later deallocated. River, which sends a fixed set of statements with
// real parameters on the same pool, keeps the default: its statements
// are worth preparing, and its JSON arguments need their described types.
type unpreparedConnector struct{ driver.Connector }

func (c unpreparedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("unexpected driver connection %T", dc)
	}
	return &unpreparedConn{Conn: sc}, nil
}

// unpreparedConn is a pgx database/sql connection whose queries without
// arguments use pgx.QueryExecModeExec: one round trip (Parse, Bind,
// Execute, Sync) with no statement kept. Exec without arguments already
// takes the simple protocol in pgx.
type unpreparedConn struct{ *stdlib.Conn }

// PgxConn is the pgx connection underneath (a unit of work begins its
// transaction on it, for River).
func (c *unpreparedConn) PgxConn() *pgx.Conn { return c.Conn.Conn() }

var execMode = []driver.NamedValue{{Ordinal: 1, Value: pgx.QueryExecModeExec}}

func (c *unpreparedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		args = execMode
	}
	return c.Conn.QueryContext(ctx, query, args)
}

// Close releases the database.
func (db *DB) Close() error {
	err := db.Bun.Close()
	if db.Pool != nil {
		db.Pool.Close()
	}
	return err
}

// Ping checks the database answers (readiness).
func (db *DB) Ping(ctx context.Context) error {
	_, err := db.Bun.ExecContext(ctx, "SELECT 1")
	return err
}

// Tx is a unit of work. Run bun queries on it (it is a bun.IDB); DriverTx is
// the same transaction as River's driver wants it, for inserting jobs that
// must commit or roll back with the data.
type Tx struct {
	bun.IDB
	// DriverTx is a *sql.Tx on SQLite and a pgx.Tx on PostgreSQL.
	DriverTx any
	// afterCommit runs once the transaction has committed, never after a
	// rollback: work that must see the change (waking a background loop)
	// starts exactly when there is something to see.
	afterCommit []func()
}

// AfterCommit calls fn once tx has committed; not at all if it rolls back.
func (tx *Tx) AfterCommit(fn func()) { tx.afterCommit = append(tx.afterCommit, fn) }

func (tx *Tx) committed() {
	for _, fn := range tx.afterCommit {
		fn()
	}
}

// InOneStatement runs fn as InTx does but without BEGIN and COMMIT, for
// work whose only write is a single statement, which the database applies
// atomically on its own: an event published through the API (one outbox
// row) paid three round trips for one, a third of the publish's CPU. fn
// may read before it writes; it must not write twice. Its AfterCommit
// hooks run once fn returns nil; DriverTx is nil (no River job can be
// added).
func (db *DB) InOneStatement(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	tx := &Tx{IDB: db.Bun}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	tx.committed()
	return nil
}

// InTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise (also on panic).
func (db *DB) InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) (err error) {
	if db.Dialect == SQLite {
		btx, err := db.Bun.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() {
			if p := recover(); p != nil {
				_ = btx.Rollback()
				panic(p)
			}
		}()
		tx := &Tx{IDB: btx, DriverTx: btx.Tx}
		if err := fn(ctx, tx); err != nil {
			if rbErr := btx.Rollback(); rbErr != nil {
				return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
			}
			return err
		}
		if err := btx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		tx.committed()
		return nil
	}

	// On PostgreSQL River's driver needs a pgx.Tx while bun needs database/sql.
	// Both run on one pinned connection: the transaction is begun with pgx on
	// the connection underneath a bun.Conn, so bun's statements on that
	// bun.Conn and River's on the pgx.Tx are one transaction.
	conn, err := db.Bun.Conn(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Close()
	var pc *pgx.Conn
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(*unpreparedConn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		pc = c.PgxConn()
		return nil
	}); err != nil {
		return err
	}
	ptx, err := pc.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			_ = ptx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	tx := &Tx{IDB: conn, DriverTx: ptx}
	if err := fn(ctx, tx); err != nil {
		if rbErr := ptx.Rollback(context.WithoutCancel(ctx)); rbErr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rbErr))
		}
		return err
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	tx.committed()
	return nil
}

// IsUniqueViolation reports whether err is a unique-constraint violation,
// by driver error code rather than message text.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// IsForeignKeyViolation reports whether err is a foreign-key violation
// (the row referred to is gone), by driver error code.
func IsForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23503"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
	}
	return false
}

// IsTooManyClients reports whether err is PostgreSQL refusing a connection
// because the server has no slot left (SQLSTATE 53300): worth retrying
// after a pause, unlike any other connect error.
func IsTooManyClients(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}

// IsNoRows reports whether err means a query found nothing.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// LikeContains returns a LIKE pattern matching s anywhere, with LIKE's
// wildcards in s made literal: use it with ESCAPE '\'.
func LikeContains(s string) string { return "%" + likeEscaper.Replace(s) + "%" }

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// UTC returns a nullable time read from the database in UTC (drivers
// return the session's zone).
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// ILike returns the case-insensitive pattern operator of the dialect. SQLite's
// LIKE is already case-insensitive for ASCII.
func (db *DB) ILike() string {
	if db.Dialect == Postgres {
		return "ILIKE"
	}
	return "LIKE"
}
