package filestore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Local keeps files in a directory: the default with SQLite, where one
// process serves. Each file is written to a temporary name, synced, then
// renamed, so a reader sees the whole file or none.
type Local struct {
	root string
}

// OpenLocal returns the store of directory root, making it when needed.
// Once open, a root that disappears (an unmounted volume) makes every call
// ErrUnavailable rather than ErrNotFound.
func OpenLocal(root string) (*Local, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, unavailable("local open", err)
	}
	return &Local{root: root}, nil
}

var _ Store = (*Local)(nil)

// Kind implements Store.
func (l *Local) Kind() string { return "local" }

// Root is the directory of the files.
func (l *Local) Root() string { return l.root }

func (l *Local) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// Put implements Store.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, _ string) error {
	abs, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return unavailable("local put", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".put-*")
	if err != nil {
		return unavailable("local put", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, ctxReader{ctx, newExactly(r, size)}); err != nil {
		if errors.Is(err, ErrSize) || errors.Is(err, ctx.Err()) {
			return err
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return unavailable("local put", err)
		}
		return err
	}
	if err := tmp.Sync(); err != nil {
		return unavailable("local put", err)
	}
	if err := tmp.Close(); err != nil {
		return unavailable("local put", err)
	}
	if err := os.Chmod(tmp.Name(), 0o640); err != nil {
		return unavailable("local put", err)
	}
	if err := os.Rename(tmp.Name(), abs); err != nil {
		return unavailable("local put", err)
	}
	done = true
	return nil
}

// Copy implements Store: through Put's temporary file and rename, so a
// reader of to sees the old file or the whole copy.
func (l *Local) Copy(ctx context.Context, from, to string) error {
	if err := CheckKey(to); err != nil {
		return err
	}
	src, err := l.Get(ctx, from)
	if err != nil {
		return err
	}
	defer src.Close()
	if from == to {
		return nil
	}
	return l.Put(ctx, to, src, src.Size, "")
}

// Get implements Store.
func (l *Local) Get(_ context.Context, key string) (*Object, error) {
	abs, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, l.classify("local get", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, unavailable("local get", err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, ErrNotFound
	}
	return &Object{ReadCloser: f, Info: Info{Size: fi.Size()}}, nil
}

// Stat implements Store.
func (l *Local) Stat(_ context.Context, key string) (Info, error) {
	abs, err := l.path(key)
	if err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Info{}, l.classify("local stat", err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, ErrNotFound
	}
	return Info{Size: fi.Size()}, nil
}

// Delete implements Store. Directories left empty up to the root go too
// (a message file's own directory, an upload's token directory).
func (l *Local) Delete(_ context.Context, key string) error {
	abs, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unavailable("local delete", err)
	}
	for dir := filepath.Dir(abs); strings.HasPrefix(dir, l.root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or already gone
		}
	}
	return nil
}

// classify turns an open/stat error into ErrNotFound or ErrUnavailable. A
// missing root is a store that is not there (an unmounted volume), not a
// missing file.
func (l *Local) classify(op string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		if _, rootErr := os.Stat(l.root); rootErr != nil {
			return unavailable(op, rootErr)
		}
		return ErrNotFound
	}
	return unavailable(op, err)
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
