package filestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/store"
)

// ChunkSize is the size of one stored chunk of the database backend: big
// enough that a 100 MB document is 400 rows, small enough that a reader
// holds one chunk at a time.
const ChunkSize = 256 << 10

// Database keeps files in the service's database, in chunks of ChunkSize:
// the default with PostgreSQL, so every replica on one PostgreSQL serves
// every file with no other component. A Put is one transaction (the file
// appears whole or not at all) and reads its source one chunk at a time;
// a Get reads one chunk per statement and holds no connection between
// them, so a slow client costs no pooled connection.
type Database struct {
	db      *sql.DB
	dialect store.Dialect
	now     func() time.Time
}

// NewDatabase returns the store over db (its migrations applied).
func NewDatabase(db *store.DB) *Database {
	return &Database{db: db.Bun.DB, dialect: db.Dialect, now: time.Now}
}

var _ Store = (*Database)(nil)

// Kind implements Store.
func (d *Database) Kind() string { return "database" }

// q numbers a statement's ? placeholders on PostgreSQL.
func (d *Database) q(query string) string {
	if d.dialect != store.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Put implements Store.
func (d *Database) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: negative size", ErrSize)
	}
	const op = "database put"
	return d.inTx(ctx, op, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, d.q("DELETE FROM file_objects WHERE file_key = ?"), key); err != nil {
			return unavailable(op, err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, d.q("INSERT INTO file_objects (file_key, size, content_type, created_at) VALUES (?, ?, ?, ?) RETURNING id"),
			key, size, contentType, d.now().UTC()).Scan(&id); err != nil {
			return unavailable(op, err)
		}
		src := newExactly(r, size)
		buf := make([]byte, min(int64(ChunkSize), max(size, 1)))
		insert := d.q("INSERT INTO file_chunks (object_id, seq, data) VALUES (?, ?, ?)")
		for seq := 0; ; seq++ {
			n, rerr := io.ReadFull(src, buf)
			if n > 0 {
				if _, err := tx.ExecContext(ctx, insert, id, seq, buf[:n]); err != nil {
					return unavailable(op, err)
				}
			}
			if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
				return nil
			}
			if rerr != nil {
				return rerr
			}
		}
	})
}

// Copy implements Store: two INSERT … SELECT in one transaction, so the
// chunks are copied by the database.
func (d *Database) Copy(ctx context.Context, from, to string) error {
	if err := errors.Join(CheckKey(from), CheckKey(to)); err != nil {
		return err
	}
	if from == to {
		_, _, err := d.head(ctx, from)
		return err
	}
	const op = "database copy"
	return d.inTx(ctx, op, func(tx *sql.Tx) error {
		var src int64
		err := tx.QueryRowContext(ctx, d.q("SELECT id FROM file_objects WHERE file_key = ?"), from).Scan(&src)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return unavailable(op, err)
		}
		if _, err := tx.ExecContext(ctx, d.q("DELETE FROM file_objects WHERE file_key = ?"), to); err != nil {
			return unavailable(op, err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, d.q("INSERT INTO file_objects (file_key, size, content_type, created_at) SELECT ?, size, content_type, ? FROM file_objects WHERE id = ? RETURNING id"),
			to, d.now().UTC(), src).Scan(&id); err != nil {
			return unavailable(op, err)
		}
		if _, err := tx.ExecContext(ctx, d.q("INSERT INTO file_chunks (object_id, seq, data) SELECT ?, seq, data FROM file_chunks WHERE object_id = ?"), id, src); err != nil {
			return unavailable(op, err)
		}
		return nil
	})
}

// inTx runs fn in one transaction, so a file appears whole or not at all;
// fn's error rolls it back and is returned as it is.
func (d *Database) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return unavailable(op, err)
	}
	return nil
}

// Get implements Store.
func (d *Database) Get(ctx context.Context, key string) (*Object, error) {
	id, size, err := d.head(ctx, key)
	if err != nil {
		return nil, err
	}
	return &Object{ReadCloser: &chunkReader{d: d, ctx: ctx, id: id, left: size}, Info: Info{Size: size}}, nil
}

// Stat implements Store.
func (d *Database) Stat(ctx context.Context, key string) (Info, error) {
	_, size, err := d.head(ctx, key)
	return Info{Size: size}, err
}

func (d *Database) head(ctx context.Context, key string) (id, size int64, err error) {
	if err := CheckKey(key); err != nil {
		return 0, 0, err
	}
	err = d.db.QueryRowContext(ctx, d.q("SELECT id, size FROM file_objects WHERE file_key = ?"), key).Scan(&id, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, ErrNotFound
	}
	if err != nil {
		return 0, 0, unavailable("database stat", err)
	}
	return id, size, nil
}

// Delete implements Store; the chunks go with their object (ON DELETE
// CASCADE).
func (d *Database) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if _, err := d.db.ExecContext(ctx, d.q("DELETE FROM file_objects WHERE file_key = ?"), key); err != nil {
		return unavailable("database delete", err)
	}
	return nil
}

// chunkReader reads an object one chunk per statement into one reused
// buffer.
type chunkReader struct {
	d    *Database
	ctx  context.Context
	id   int64
	seq  int
	left int64
	buf  []byte
	pos  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.pos == len(c.buf) {
		if c.left <= 0 {
			return 0, io.EOF
		}
		if err := c.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.pos:])
	c.pos += n
	return n, nil
}

func (c *chunkReader) next() error {
	rows, err := c.d.db.QueryContext(c.ctx, c.d.q("SELECT data FROM file_chunks WHERE object_id = ? AND seq = ?"), c.id, c.seq)
	if err != nil {
		return unavailable("database read", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return unavailable("database read", err)
		}
		// Deleted while being read.
		return fmt.Errorf("%w: chunk %d of object %d: %w", ErrNotFound, c.seq, c.id, io.ErrUnexpectedEOF)
	}
	var raw sql.RawBytes
	if err := rows.Scan(&raw); err != nil {
		return unavailable("database read", err)
	}
	if c.buf == nil {
		c.buf = make([]byte, 0, ChunkSize)
	}
	c.buf = append(c.buf[:0], raw...)
	c.pos = 0
	c.seq++
	c.left -= int64(len(c.buf))
	if len(c.buf) == 0 {
		return fmt.Errorf("%w: empty chunk %d of object %d", ErrUnavailable, c.seq-1, c.id)
	}
	return rows.Close()
}

// Close implements io.Closer.
func (c *chunkReader) Close() error { c.buf = nil; return nil }
