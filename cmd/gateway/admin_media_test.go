package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestAdminMediaMigrate: the files of an old data directory are copied into
// the configured store under the same keys, and a second run copies
// nothing again.
func TestAdminMediaMigrate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		old := t.TempDir()
		files := map[string]string{"messages/1/abc/photo.png": "png bytes", "templates/tok123/promo.pdf": "%PDF-1.7"}
		for key, body := range files {
			p := filepath.Join(old, "media", filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cfg := apitest.Config(t)
		cfg.MediaStore = filestore.SettingDatabase
		a, err := app.New(ctx, cfg, app.Options{DB: db, InsertOnlyJobs: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		migrate := func(args ...string) (mediaMigrateResult, error) {
			fs := flag.NewFlagSet("admin media migrate", flag.ContinueOnError)
			action := adminCommands["media migrate"].flags(fs)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			res, err := action(ctx, a)
			if err != nil {
				return mediaMigrateResult{}, err
			}
			var buf bytes.Buffer
			if err := printJSON(&buf, res); err != nil {
				t.Fatal(err)
			}
			var out mediaMigrateResult
			return out, json.Unmarshal(buf.Bytes(), &out)
		}
		for _, tc := range []struct {
			name            string
			copied, skipped int
		}{{"first run", 2, 0}, {"run again", 0, 2}} {
			t.Run(tc.name, func(t *testing.T) {
				res, err := migrate("-from", old)
				if err != nil || res.Copied != tc.copied || res.Skipped != tc.skipped || res.Store != "database" {
					t.Fatalf("%+v %v", res, err)
				}
			})
		}
		for key, body := range files {
			obj, err := a.Files.Get(ctx, key)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			b, _ := io.ReadAll(obj)
			_ = obj.Close()
			if string(b) != body {
				t.Fatalf("%s: %q", key, b)
			}
		}
		t.Run("into its own directory", func(t *testing.T) {
			cfg := apitest.Config(t)
			cfg.MediaStore = filestore.SettingLocal
			local, err := app.New(ctx, cfg, app.Options{DB: db, InsertOnlyJobs: true, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			fs := flag.NewFlagSet("admin media migrate", flag.ContinueOnError)
			action := adminCommands["media migrate"].flags(fs)
			_ = fs.Parse(nil)
			if _, err := action(ctx, local); err == nil || !strings.Contains(err.Error(), "MEDIA_STORE") {
				t.Fatalf("copying a directory onto itself: %v", err)
			}
		})
	})
}
