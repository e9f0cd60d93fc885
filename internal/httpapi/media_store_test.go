package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/filestore"
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
