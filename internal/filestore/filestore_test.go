package filestore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// pattern is a reader of n deterministic bytes that never holds them all.
func pattern(n int64) io.Reader {
	return io.LimitReader(&patternReader{}, n)
}

type patternReader struct{ i byte }

func (p *patternReader) Read(b []byte) (int, error) {
	for k := range b {
		b[k] = p.i*31 + 7
		p.i++
	}
	return len(b), nil
}

func sum(r io.Reader) ([32]byte, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s, n, err
}

// failingReader fails after n bytes, as a client that goes away mid-body.
type failingReader struct{ n int }

var errClientGone = errors.New("client went away")

func (f *failingReader) Read(b []byte) (int, error) {
	if f.n <= 0 {
		return 0, errClientGone
	}
	k := min(len(b), f.n)
	for i := range b[:k] {
		b[i] = 'x'
	}
	f.n -= k
	return k, nil
}

// testStore is the conformance suite every backend passes.
func testStore(t *testing.T, s filestore.Store) {
	ctx := context.Background()
	t.Run("round trip", func(t *testing.T) {
		for _, size := range []int64{0, 1, filestore.ChunkSize - 1, filestore.ChunkSize, filestore.ChunkSize + 1, 3*filestore.ChunkSize + 17} {
			key := "rt/" + strings.Repeat("a", 3) + "/" + itoa(size) + ".bin"
			if err := s.Put(ctx, key, pattern(size), size, "application/octet-stream"); err != nil {
				t.Fatalf("put %d: %v", size, err)
			}
			info, err := s.Stat(ctx, key)
			if err != nil || info.Size != size {
				t.Fatalf("stat %d: %+v %v", size, info, err)
			}
			obj, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("get %d: %v", size, err)
			}
			got, n, err := sum(obj)
			_ = obj.Close()
			want, _, _ := sum(pattern(size))
			if err != nil || n != size || got != want || obj.Size != size {
				t.Fatalf("size %d: read %d bytes (object says %d), err %v, same bytes %v", size, n, obj.Size, err, got == want)
			}
		}
	})
	t.Run("copy", func(t *testing.T) {
		size := int64(2*filestore.ChunkSize + 5)
		want, _, _ := sum(pattern(size))
		if err := s.Put(ctx, "copy/src.bin", pattern(size), size, "application/pdf"); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "copy/dst.bin", strings.NewReader("old"), 3, "text/plain"); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"copy/new/dst.bin", "copy/dst.bin"} { // a new key, and one replaced
			if err := s.Copy(ctx, "copy/src.bin", to); err != nil {
				t.Fatalf("copy to %s: %v", to, err)
			}
		}
		if err := s.Delete(ctx, "copy/src.bin"); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"copy/new/dst.bin", "copy/dst.bin"} {
			obj, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			got, n, err := sum(obj)
			_ = obj.Close()
			if err != nil || n != size || got != want {
				t.Fatalf("%s after its source went: %d bytes, err %v, same bytes %v", key, n, err, got == want)
			}
		}
		if err := s.Copy(ctx, "copy/missing.bin", "copy/x.bin"); !errors.Is(err, filestore.ErrNotFound) {
			t.Errorf("copy of a missing file: %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, "copy/x.bin"); !errors.Is(err, filestore.ErrNotFound) {
			t.Errorf("a failed copy left a file: %v", err)
		}
		if err := s.Copy(ctx, "copy/dst.bin", "../x"); !errors.Is(err, filestore.ErrInvalidKey) {
			t.Errorf("copy to an invalid key: %v, want ErrInvalidKey", err)
		}
	})
	t.Run("replace", func(t *testing.T) {
		key := "replace/x.txt"
		for _, body := range []string{"first version, longer", "second"} {
			if err := s.Put(ctx, key, strings.NewReader(body), int64(len(body)), "text/plain"); err != nil {
				t.Fatal(err)
			}
		}
		obj, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if b, _ := io.ReadAll(obj); string(b) != "second" {
			t.Fatalf("read %q", b)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := s.Get(ctx, "nope/none.bin"); !errors.Is(err, filestore.ErrNotFound) {
			t.Fatalf("get: %v", err)
		}
		if _, err := s.Stat(ctx, "nope/none.bin"); !errors.Is(err, filestore.ErrNotFound) {
			t.Fatalf("stat: %v", err)
		}
		if err := s.Delete(ctx, "nope/none.bin"); err != nil {
			t.Fatalf("delete of a missing file: %v", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		key := "del/a/b.bin"
		if err := s.Put(ctx, key, pattern(filestore.ChunkSize+5), filestore.ChunkSize+5, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, filestore.ErrNotFound) {
			t.Fatalf("stat after delete: %v", err)
		}
	})
	t.Run("short, long and failing sources leave nothing", func(t *testing.T) {
		cases := []struct {
			name string
			r    io.Reader
			size int64
			want error
		}{
			{"short", pattern(10), 11, filestore.ErrSize},
			{"long", pattern(filestore.ChunkSize + 2), filestore.ChunkSize + 1, filestore.ErrSize},
			{"source fails", &failingReader{n: filestore.ChunkSize + 100}, 2 * filestore.ChunkSize, errClientGone},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				key := "bad/" + tc.name + ".bin"
				err := s.Put(ctx, key, tc.r, tc.size, "")
				if !errors.Is(err, tc.want) {
					t.Fatalf("put: %v, want %v", err, tc.want)
				}
				if _, err := s.Stat(ctx, key); !errors.Is(err, filestore.ErrNotFound) {
					t.Fatalf("a failed put left a file: %v", err)
				}
			})
		}
	})
	t.Run("a failed replace keeps the old file", func(t *testing.T) {
		key := "keep/old.txt"
		if err := s.Put(ctx, key, strings.NewReader("old"), 3, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, key, pattern(5), 6, ""); !errors.Is(err, filestore.ErrSize) {
			t.Fatalf("put: %v", err)
		}
		obj, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if b, _ := io.ReadAll(obj); string(b) != "old" {
			t.Fatalf("read %q", b)
		}
	})
	t.Run("invalid keys", func(t *testing.T) {
		for _, key := range []string{"", "/abs", "a/../b", "a//b", "..", "a\\b", "a/./b", "trailing/"} {
			if err := s.Put(ctx, key, strings.NewReader("x"), 1, ""); !errors.Is(err, filestore.ErrInvalidKey) {
				t.Errorf("put %q: %v", key, err)
			}
			if _, err := s.Get(ctx, key); !errors.Is(err, filestore.ErrInvalidKey) {
				t.Errorf("get %q: %v", key, err)
			}
		}
	})
	t.Run("concurrent readers and writers", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "conc/" + itoa(int64(i)) + ".bin"
				size := int64(filestore.ChunkSize + i)
				if err := s.Put(ctx, key, pattern(size), size, ""); err != nil {
					errs <- err
					return
				}
				obj, err := s.Get(ctx, key)
				if err != nil {
					errs <- err
					return
				}
				defer obj.Close()
				if _, n, err := sum(obj); err != nil || n != size {
					errs <- errors.Join(err, errors.New("short read"))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestLocal(t *testing.T) {
	t.Parallel()
	s, err := filestore.OpenLocal(filepath.Join(t.TempDir(), "media"))
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	t.Run("deleting the last file removes its directories", func(t *testing.T) {
		ctx := context.Background()
		if err := s.Put(ctx, "messages/7/u/a.pdf", strings.NewReader("%PDF"), 4, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "messages/7/u/a.pdf"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(s.Root(), "messages")); !os.IsNotExist(err) {
			t.Fatalf("empty directories left: %v", err)
		}
		if _, err := os.Stat(s.Root()); err != nil {
			t.Fatalf("the root went too: %v", err)
		}
	})
}

func TestDatabase(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		if err := db.Migrate(context.Background(), filestore.Migrations); err != nil {
			t.Fatal(err)
		}
		s := filestore.NewDatabase(db)
		testStore(t, s)
		t.Run("a file is stored in chunks", func(t *testing.T) {
			ctx := context.Background()
			size := int64(2*filestore.ChunkSize + 1)
			if err := s.Put(ctx, "chunks/x.bin", pattern(size), size, ""); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := db.Bun.NewSelect().Table("file_chunks").ColumnExpr("count(*)").
				Where("object_id = (SELECT id FROM file_objects WHERE file_key = ?)", "chunks/x.bin").Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Fatalf("%d chunks, want 3", n)
			}
		})
	})
}

// TestUnreachable: a backend that cannot be reached answers ErrUnavailable,
// never ErrNotFound, so the API answers 503 rather than a false 404.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	local, err := filestore.OpenLocal(filepath.Join(dir, "media"))
	if err != nil {
		t.Fatal(err)
	}
	// The volume goes away after start.
	if err := os.RemoveAll(local.Root()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local.Root(), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	closedDB := storetest.SQLite(t)
	if err := closedDB.Migrate(ctx, filestore.Migrations); err != nil {
		t.Fatal(err)
	}
	database := filestore.NewDatabase(closedDB)
	_ = closedDB.Close()
	cfg, err := filestore.ParseS3("s3://media?endpoint=http://127.0.0.1:9&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := filestore.OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []filestore.Store{local, database, s3} {
		t.Run(s.Kind(), func(t *testing.T) {
			if err := s.Put(ctx, "a/b.bin", strings.NewReader("abc"), 3, ""); !errors.Is(err, filestore.ErrUnavailable) {
				t.Errorf("put: %v", err)
			}
			if _, err := s.Get(ctx, "a/b.bin"); !errors.Is(err, filestore.ErrUnavailable) {
				t.Errorf("get: %v", err)
			}
			if _, err := s.Stat(ctx, "a/b.bin"); !errors.Is(err, filestore.ErrUnavailable) {
				t.Errorf("stat: %v", err)
			}
			if err := s.Delete(ctx, "a/b.bin"); !errors.Is(err, filestore.ErrUnavailable) {
				t.Errorf("delete: %v", err)
			}
		})
	}
}

func TestParseS3(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want filestore.S3Config
		bad  bool
	}{
		{in: "s3://media?endpoint=127.0.0.1:8333&region=us-east-1&secure=false",
			want: filestore.S3Config{Bucket: "media", Endpoint: "127.0.0.1:8333", Region: "us-east-1", PathStyle: true}},
		{in: "s3://media?endpoint=http://minio:9000",
			want: filestore.S3Config{Bucket: "media", Endpoint: "minio:9000", PathStyle: true}},
		{in: "s3://media?region=eu-west-1&prefix=gw/",
			want: filestore.S3Config{Bucket: "media", Endpoint: "s3.amazonaws.com", Region: "eu-west-1", Secure: true, Prefix: "gw/"}},
		{in: "s3://key:secret@media", bad: true},
		{in: "s3://media/path", bad: true},
		{in: "s3://media?secure=maybe", bad: true},
		{in: "s3://media?prefix=../x", bad: true},
		{in: "http://media", bad: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := filestore.ParseS3(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("the error quotes the credentials: %v", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

func TestMissingLogOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := filestore.NewMissingLog(newTextLogger(&buf))
	if !m.Report(context.Background(), "messages/1/a.pdf", "message_id", 1) {
		t.Fatal("first report not logged")
	}
	if m.Report(context.Background(), "messages/1/a.pdf", "message_id", 1) {
		t.Fatal("second report logged again")
	}
	if n := strings.Count(buf.String(), "stored file missing"); n != 1 {
		t.Fatalf("%d log lines", n)
	}
}

// TestCopyDir: the admin migration copies a data directory's files key for
// key, and a second run copies nothing again.
func TestCopyDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "media")
	files := map[string]string{"messages/3/u1/a.pdf": "%PDF-1", "templates/tok/b.png": "png", "messages/4/u2/c.jpg": "jpeg!"}
	for key, body := range files {
		p := filepath.Join(src, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A temporary file of an interrupted put is not copied.
	if err := os.WriteFile(filepath.Join(src, "messages", ".put-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := storetest.SQLite(t)
	if err := db.Migrate(ctx, filestore.Migrations); err != nil {
		t.Fatal(err)
	}
	dst := filestore.NewDatabase(db)
	res, err := filestore.CopyDir(ctx, src, dst, nil)
	if err != nil || res.Copied != 3 || res.Skipped != 0 {
		t.Fatalf("first run: %+v %v", res, err)
	}
	for key, body := range files {
		obj, err := dst.Get(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		b, _ := io.ReadAll(obj)
		_ = obj.Close()
		if string(b) != body {
			t.Fatalf("%s: %q", key, b)
		}
	}
	res, err = filestore.CopyDir(ctx, src, dst, nil)
	if err != nil || res.Copied != 0 || res.Skipped != 3 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	if _, err := filestore.CopyDir(ctx, filepath.Join(t.TempDir(), "none"), dst, nil); err == nil {
		t.Fatal("a missing directory was accepted")
	}
}
