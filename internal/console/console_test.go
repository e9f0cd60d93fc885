package console_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/console"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestConsoleRoutes checks what the gateway answers under /console through the real router: the page
// with its same-origin CSP, the embedded bundle, and the API's own JSON for anything else.
func TestConsoleRoutes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		cases := []struct {
			name, method, path string
			status             int
			want               map[string]string // response headers that must have these values
			body               string            // substring of the body
		}{
			{name: "page", method: "GET", path: "/console", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": console.CSP,
					"Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"},
				body: `src="/console/assets/console.js"`},
			{name: "trailing slash", method: "GET", path: "/console/", status: http.StatusOK, body: "console.css"},
			{name: "HEAD of the page", method: "HEAD", path: "/console", status: http.StatusOK},
			{name: "script", method: "GET", path: "/console/assets/console.js", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/javascript; charset=utf-8", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}},
			{name: "stylesheet", method: "GET", path: "/console/assets/console.css", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/css; charset=utf-8"}},
			{name: "bundle manifest", method: "GET", path: "/console/assets/MANIFEST", status: http.StatusOK, body: "preact@"},
			{name: "licenses", method: "GET", path: "/console/assets/LICENSES", status: http.StatusOK, body: "openapi-fetch@"},
			{name: "unknown asset", method: "GET", path: "/console/assets/nope.js", status: http.StatusNotFound, body: `"Not found."`},
			{name: "unknown console path", method: "GET", path: "/console/nope", status: http.StatusNotFound, body: `"Not found."`},
			{name: "asset path escape", method: "GET", path: "/console/assets/../../openapi.yaml", status: http.StatusNotFound, body: `"Not found."`},
			{name: "other method goes to the API", method: "POST", path: "/console", status: http.StatusNotFound, body: `"Not found."`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				req, err := http.NewRequest(c.method, h.Server.URL+c.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != c.status {
					t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, c.status, b)
				}
				for k, v := range c.want {
					if got := resp.Header.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
				if !strings.Contains(string(b), c.body) {
					t.Errorf("body does not contain %q: %.300s", c.body, b)
				}
			})
		}
	})
}

// TestConsoleETag: the bundle revalidates by ETag (one 304, no body) rather than downloading again.
func TestConsoleETag(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{})
	resp, err := http.Get(h.Server.URL + "/console/assets/console.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on the bundle")
	}
	req, _ := http.NewRequest("GET", h.Server.URL+"/console/assets/console.js", nil)
	req.Header.Set("If-None-Match", etag)
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation answered %d, want 304", again.StatusCode)
	}
}
