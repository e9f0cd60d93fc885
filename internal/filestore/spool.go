package filestore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Spool keeps files in transit on the replica's own disk: a multipart
// upload while it is checked, before any layer decides to store it. A
// file in transit may be a 100 MB document, and several may arrive at
// once; on disk they cost page cache, which the kernel reclaims, never the
// process's heap.
//
// A Spool is the directory it writes to; the zero Spool writes to the
// system's temporary directory.
type Spool struct{ Dir string }

// spoolPrefix names a spooled file, so that Clear removes only those.
const spoolPrefix = "spool-"

// ErrTooLarge is a source longer than the limit given to Write.
var ErrTooLarge = errors.New("filestore: spooled file over its limit")

// Write copies r into a new spooled file, reading at most limit bytes
// (ErrTooLarge past it). It returns the file's size and SHA-256. Errors of
// r are returned as they are, so that a caller can tell a client's cut-off
// body from a full disk.
func (s Spool) Write(r io.Reader, limit int64) (*Spooled, error) {
	f, err := os.CreateTemp(s.Dir, spoolPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("spool: %w", cerr)
	}
	if err == nil && n > limit {
		err = ErrTooLarge
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, err
	}
	sp := &Spooled{path: f.Name(), Size: n}
	h.Sum(sp.SHA256[:0])
	return sp, nil
}

// Clear removes what a process left in the spool when it was killed with
// requests in flight: files older than age, which no request still reads
// (a request's own deadlines end it long before), so a replica starting
// beside another on the same directory takes nothing from it.
func (s Spool) Clear(age time.Duration) error {
	dir := s.Dir
	if dir == "" {
		return nil // the shared temporary directory is not ours to sweep
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("clear spool: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), spoolPrefix) || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < age {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Spooled is one file in the spool.
type Spooled struct {
	path   string
	Size   int64
	SHA256 [sha256.Size]byte
}

// Open reads the file from its start; each call is a new reader.
func (s *Spooled) Open() (io.ReadCloser, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("open spooled file: %w", err)
	}
	return f, nil
}

// Remove deletes the file; one already gone is not an error.
func (s *Spooled) Remove() error {
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove spooled file: %w", err)
	}
	return nil
}
