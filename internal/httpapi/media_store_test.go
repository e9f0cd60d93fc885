package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// storedFile reads the file under key from the app's media store (the
// local directory on SQLite, the database on PostgreSQL); ok is false when
// the store has none.
func storedFile(t testing.TB, a *app.App, key string) (data []byte, ok bool) {
	t.Helper()
	obj, err := a.Files.Get(context.Background(), key)
	if errors.Is(err, filestore.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("media store: %v", err)
	}
	defer obj.Close()
	data, err = io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data, true
}

// messageFileKey is the store key of a message's file (its media_path).
func messageFileKey(mediaPath string) string { return "messages/" + mediaPath }

// uploadKey is the store key of an upload from its URL
// (…/media/<token>/<file name>).
func uploadKey(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := strings.CutPrefix(u.Path, "/media/")
	if !ok {
		t.Fatalf("not an upload URL: %s", rawURL)
	}
	return "templates/" + rest
}

// mediaEnv is an official environment whose replicas keep their files in
// the database (the default on PostgreSQL; set explicitly on SQLite, where
// the default is the local directory).
func mediaEnvOptions(db *store.DB) ofcEnvOptions {
	o := ofcEnvOptions{}
	if db.Dialect == store.SQLite {
		o.configure = func(c *config.Config) { c.MediaStore = filestore.SettingDatabase }
	}
	return o
}

// secondReplica starts another app on db with its own data directory,
// as a second host behind the balancer would run.
func secondReplica(t *testing.T, e *officialEnv, db *store.DB, configure func(*config.Config)) *apitest.Harness {
	t.Helper()
	return apitest.Start(t, db, apitest.Options{Now: e.clk.Now, WorkJobs: true, Configure: func(c *config.Config) {
		if db.Dialect == store.SQLite {
			c.MediaStore = filestore.SettingDatabase
		}
		if configure != nil {
			configure(c)
		}
	}})
}

func uploadThrough(t *testing.T, h *apitest.Harness, e *officialEnv, name, declared string, content []byte) (*apitest.Response, uploadAnswer) {
	t.Helper()
	r := h.Do(apitest.Request{Method: "POST", Path: "/api/provider-templates/upload-send-media", Token: e.ten.Token,
		Form:      map[string]string{"provider_account_id": strconv.FormatInt(e.ch.ProviderAccount.ID, 10)},
		FileField: "file", FileName: name, FileType: declared, FileContent: content})
	var up uploadAnswer
	if r.Status == http.StatusOK {
		r.JSON(t, &up)
	}
	return r, up
}

func urlPath(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.EscapedPath()
}

// TestReplicasServeEachOthersMedia: two replicas with their own data
// directories on one database serve each other's uploads, message files,
// and header media in sends.
func TestReplicasServeEachOthersMedia(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, mediaEnvOptions(db))
		ofcSeedTemplates(t, e)
		a := e.h
		b := secondReplica(t, e, db, nil)
		if a.App.Config.DataDir == b.App.Config.DataDir || a.App.Files.Kind() != "database" || b.App.Files.Kind() != "database" {
			t.Fatalf("replicas: data dirs %s and %s, stores %s and %s", a.App.Config.DataDir, b.App.Config.DataDir, a.App.Files.Kind(), b.App.Files.Kind())
		}
		img := pngImage(t, 16, 16)

		t.Run("an upload made through one is served by the other", func(t *testing.T) {
			r, up := uploadThrough(t, a, e, "banner.png", "image/png", img)
			if r.Status != http.StatusOK {
				t.Fatalf("upload: %d %s", r.Status, r.Body)
			}
			got := b.Do(apitest.Request{Method: "GET", Path: urlPath(t, up.Data.URL)})
			if got.Status != http.StatusOK || !bytes.Equal(got.Body, img) {
				t.Fatalf("served by the other replica: %d, %d bytes", got.Status, len(got.Body))
			}
		})
		t.Run("header media uploaded through one is sent through the other", func(t *testing.T) {
			_, up := uploadThrough(t, b, e, "header.png", "image/png", img)
			r := b.Do(e.sendRequest(map[string]any{"provider_template_id": e.template("promo_image"), "header_media_url": up.Data.URL}))
			if r.Status != http.StatusOK {
				t.Fatalf("send through the other replica: %d %s", r.Status, r.Body)
			}
			r = a.Do(e.sendRequest(map[string]any{"provider_template_id": e.template("promo_image"), "header_media_url": up.Data.URL}))
			if r.Status != http.StatusOK {
				t.Fatalf("send through the uploading replica: %d %s", r.Status, r.Body)
			}
		})
		t.Run("a message file stored by one is served by the other", func(t *testing.T) {
			if err := a.App.Messaging.ReceiveInbound(ctx, messaging.Inbound{Channel: e.ch, ExternalID: "wamid.replica-file", ContactKey: ofcContactKey,
				Text: "foto", Media: messaging.MediaBytes("foto.png", "image/png", img)}); err != nil {
				t.Fatal(err)
			}
			m, err := a.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.replica-file")
			if err != nil {
				t.Fatal(err)
			}
			// The URL comes from the other replica's API, as a client asking
			// either would get it.
			link := b.Do(apitest.Request{Method: "GET", Path: "/api/messages/" + strconv.FormatInt(m.ID, 10) + "/media", Token: e.ten.Token})
			if link.Status != http.StatusOK {
				t.Fatalf("media link: %d %s", link.Status, link.Body)
			}
			var ans struct {
				Data struct {
					URL string `json:"url"`
				} `json:"data"`
			}
			link.JSON(t, &ans)
			for name, h := range map[string]*apitest.Harness{"storing replica": a, "other replica": b} {
				got := h.Do(apitest.Request{Method: "GET", Path: urlPath(t, ans.Data.URL)})
				if got.Status != http.StatusOK || !bytes.Equal(got.Body, img) {
					t.Fatalf("%s: %d, %d bytes", name, got.Status, len(got.Body))
				}
			}
		})
	})
}

// TestMediaStoreUnreachable: uploads and file URLs answer 503 with
// Retry-After while the media store cannot be reached, and an upload
// refused so leaves no row behind.
func TestMediaStoreUnreachable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, mediaEnvOptions(db))
		img := pngImage(t, 8, 8)
		_, up := uploadThrough(t, e.h, e, "ok.png", "image/png", img)
		if err := e.h.App.Messaging.ReceiveInbound(ctx, messaging.Inbound{Channel: e.ch, ExternalID: "wamid.down", ContactKey: ofcContactKey,
			Media: messaging.MediaBytes("f.png", "image/png", img)}); err != nil {
			t.Fatal(err)
		}
		m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.down")
		if err != nil {
			t.Fatal(err)
		}
		m, err = e.h.App.Messaging.MediaOf(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		// A replica whose store is an S3 endpoint nobody listens on.
		down := secondReplica(t, e, db, func(c *config.Config) {
			c.MediaStore = "s3://media?endpoint=http://127.0.0.1:9&region=us-east-1"
		})
		countUploads := func() int {
			var n int
			if err := db.Bun.NewSelect().Table("template_media").ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := countUploads()
		cases := []struct {
			name string
			do   func() *apitest.Response
		}{
			{"upload", func() *apitest.Response { r, _ := uploadThrough(t, down, e, "x.png", "image/png", img); return r }},
			{"serve an upload", func() *apitest.Response {
				return down.Do(apitest.Request{Method: "GET", Path: urlPath(t, up.Data.URL)})
			}},
			{"serve a message file", func() *apitest.Response {
				return down.Do(apitest.Request{Method: "GET", Path: urlPath(t, m.MediaLink.URL)})
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := tc.do()
				if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || r.Map(t)["message"] != "The media store is unavailable; retry later." {
					t.Fatalf("%d %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
				}
			})
		}
		if n := countUploads(); n != before {
			t.Fatalf("a refused upload wrote a row: %d rows, %d before", n, before)
		}
		t.Run("retention waits for the store", func(t *testing.T) {
			e.clk.Advance(73 * time.Hour)
			if n, err := down.App.Templates.DeleteExpiredMedia(ctx); n != 0 || fault.KindOf(err) != fault.Unavailable {
				t.Fatalf("cleanup with the store down: %d, %v", n, err)
			}
			if _, ok := storedFile(t, e.h.App, uploadKey(t, up.Data.URL)); !ok {
				t.Fatal("the file went although the cleanup failed")
			}
			// The row was given back: a cleanup that reaches the store
			// deletes the file, and the URL answers 410. The replica's own
			// periodic cleanup may get there first, so this one deletes
			// the upload or finds it gone.
			if n, err := e.h.App.Templates.DeleteExpiredMedia(ctx); n > 1 || err != nil {
				t.Fatalf("cleanup with the store back: %d, %v", n, err)
			}
			// When the periodic cleanup got there first it may still be
			// deleting the file: wait for it (bounded), not look at once.
			eventually(t, "the expired upload's file deleted", func() bool {
				_, ok := storedFile(t, e.h.App, uploadKey(t, up.Data.URL))
				return !ok
			})
			if r := e.h.Do(apitest.Request{Method: "GET", Path: urlPath(t, up.Data.URL)}); r.Status != http.StatusGone {
				t.Fatalf("expired upload: %d", r.Status)
			}
		})
	})
}

// TestMediaMissingFromStore: a row whose file the store lacks answers 404,
// and the loss is logged once however often the URL is asked for.
func TestMediaMissingFromStore(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newOfficialEnv(t, db, mediaEnvOptions(db))
		var logs syncLog
		h := apitest.Start(t, db, apitest.Options{Now: e.clk.Now, Logs: &logs, Configure: func(c *config.Config) {
			if db.Dialect == store.SQLite {
				c.MediaStore = filestore.SettingDatabase
			}
		}})
		img := pngImage(t, 8, 8)
		_, up := uploadThrough(t, e.h, e, "lost.png", "image/png", img)
		if err := e.h.App.Messaging.ReceiveInbound(ctx, messaging.Inbound{Channel: e.ch, ExternalID: "wamid.lost", ContactKey: ofcContactKey,
			Media: messaging.MediaBytes("lost.png", "image/png", img)}); err != nil {
			t.Fatal(err)
		}
		m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, "wamid.lost")
		if err != nil {
			t.Fatal(err)
		}
		m, err = e.h.App.Messaging.MediaOf(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{uploadKey(t, up.Data.URL), messageFileKey(m.MediaPath)} {
			if err := e.h.App.Files.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		for _, path := range []string{urlPath(t, up.Data.URL), urlPath(t, m.MediaLink.URL)} {
			for range 3 {
				if r := h.Do(apitest.Request{Method: "GET", Path: path}); r.Status != http.StatusNotFound || r.Map(t)["message"] != "Media not found" {
					t.Fatalf("%s: %d %s", path, r.Status, r.Body)
				}
			}
		}
		if n := strings.Count(logs.String(), "stored file missing"); n != 2 {
			t.Fatalf("%d log lines about missing files, want one per file:\n%s", n, logs.String())
		}
	})
}
