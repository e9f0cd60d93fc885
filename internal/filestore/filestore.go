// Package filestore keeps the files the gateway stores (uploaded header
// media, the files of messages) behind one streamed interface with three
// backends: a local directory (the default with SQLite), the database in
// chunks (the default with PostgreSQL, so N replicas on one PostgreSQL
// need nothing else) and S3-compatible object storage. Every backend
// passes the same conformance suite (filestore_test.go).
//
// Keys are slash-separated relative paths ("messages/12/<uuid>/a.pdf").
// Callers keep their own rows (content type, file name, size) and use the
// store only for the bytes; a row is written after its file is stored and
// the file is deleted after its row, so a row never points to a file
// that was never written.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Store keeps files by key. Implementations are safe for concurrent use.
type Store interface {
	// Put stores exactly size bytes read from r under key, replacing what
	// was there. Nothing is visible under key until the whole file is
	// stored: a failed Put leaves the previous file or none.
	// Errors: ErrInvalidKey; ErrSize when r holds fewer or more than size
	// bytes; ErrUnavailable when the backend cannot be reached; an error of
	// r itself.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get opens the file under key for reading; the caller closes it. The
	// file is streamed: a backend never holds a whole file in memory.
	// Errors: ErrInvalidKey, ErrNotFound, ErrUnavailable (also from Read).
	Get(ctx context.Context, key string) (*Object, error)
	// Stat returns what is known of the file under key.
	// Errors: ErrInvalidKey, ErrNotFound, ErrUnavailable.
	Stat(ctx context.Context, key string) (Info, error)
	// Copy stores the file under from also under to, replacing what was
	// there, inside the store: its bytes never pass through the caller
	// (a message's file made from a header-media upload), and a database
	// store is never read while it writes. Errors: ErrInvalidKey,
	// ErrNotFound for a missing from, ErrUnavailable.
	Copy(ctx context.Context, from, to string) error
	// Delete removes the file under key; a file already gone is not an
	// error. Errors: ErrInvalidKey, ErrUnavailable.
	Delete(ctx context.Context, key string) error
	// Kind names the backend ("local", "database", "s3") for logs.
	Kind() string
}

// Info describes a stored file.
type Info struct {
	Size int64
}

// Object is an open stored file.
type Object struct {
	io.ReadCloser
	Info
}

var (
	// ErrNotFound is a key with no file.
	ErrNotFound = errors.New("filestore: file not found")
	// ErrUnavailable is a backend that could not be reached or failed; the
	// same call may succeed later.
	ErrUnavailable = errors.New("filestore: store unavailable")
	// ErrSize is a Put whose reader did not hold the size it announced.
	ErrSize = errors.New("filestore: size does not match the bytes read")
	// ErrInvalidKey is a key that is empty, absolute, or escapes its root.
	ErrInvalidKey = errors.New("filestore: invalid key")
)

// maxKeyLen bounds a key (S3 allows 1024 bytes).
const maxKeyLen = 900

// CheckKey refuses keys that are empty, too long, absolute, carry empty,
// "." or ".." segments, backslashes or NUL bytes.
func CheckKey(key string) error {
	if key == "" || len(key) > maxKeyLen || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// unavailable wraps a backend failure as ErrUnavailable, keeping its cause.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// exactly reads size bytes of r and fails with ErrSize when r holds fewer
// or more; the check for "more" reads one byte past size.
type exactly struct {
	r    io.Reader
	left int64
	err  error
}

func newExactly(r io.Reader, size int64) *exactly { return &exactly{r: r, left: size} }

func (e *exactly) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.left == 0 {
		var one [1]byte
		n, err := io.ReadFull(e.r, one[:])
		if n > 0 {
			e.err = fmt.Errorf("%w: more than announced", ErrSize)
			return 0, e.err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			e.err = err
			return 0, err
		}
		e.err = io.EOF
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if e.left > 0 {
			e.err = fmt.Errorf("%w: %d bytes short", ErrSize, e.left)
			return n, e.err
		}
		err = nil
	}
	if err != nil {
		e.err = err
	}
	return n, err
}
