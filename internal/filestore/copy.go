package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CopyResult counts what CopyDir did.
type CopyResult struct {
	// Copied files were written to the destination; Skipped ones were
	// there already with the same size.
	Copied, Skipped int
	Bytes           int64
}

// CopyDir copies every file under dir (a local store's root, such as
// DATA_DIR/media) into dst under the same key. A file dst already holds
// with the same size is skipped, so a run that was cut off can simply be
// run again. Temporary files of an interrupted local Put are left out.
// progress, when set, is called after each file.
func CopyDir(ctx context.Context, dir string, dst Store, progress func(key string, copied bool)) (CopyResult, error) {
	var res CopyResult
	root, err := filepath.Abs(dir)
	if err != nil {
		return res, err
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".put-") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if CheckKey(key) != nil {
			return nil // not a file of the store's key space
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if info, err := dst.Stat(ctx, key); err == nil && info.Size == fi.Size() {
			res.Skipped++
			if progress != nil {
				progress(key, false)
			}
			return nil
		} else if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("stat %s: %w", key, err)
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := dst.Put(ctx, key, f, fi.Size(), ""); err != nil {
			return fmt.Errorf("copy %s: %w", key, err)
		}
		res.Copied++
		res.Bytes += fi.Size()
		if progress != nil {
			progress(key, true)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && res.Copied == 0 && res.Skipped == 0 {
		if _, statErr := os.Stat(root); statErr != nil {
			return res, fmt.Errorf("no media directory at %s: %w", root, statErr)
		}
	}
	return res, err
}
