package docs_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// answer is what raw returns: the real response, not followed through redirects.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// raw sends one request to the running gateway without following redirects, so "/" shows its own
// answer. The documents' answers also go through apitest's Do, which validates them.
func raw(t *testing.T, h *apitest.Harness, method, path string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, h.Server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestDocsRoutes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		preflight := func(method string) http.Header {
			return http.Header{"Origin": {"https://tools.example"}, "Access-Control-Request-Method": {method}}
		}
		cases := []struct {
			name, method, path string
			header             http.Header
			status             int
			want               map[string]string // response headers that must have these values ("" = absent)
			body               string            // substring of the body
		}{
			{name: "root redirects to the docs", method: "GET", path: "/", status: http.StatusFound,
				want: map[string]string{"Location": "/docs"}},
			{name: "API reference", method: "GET", path: "/docs", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/html; charset=utf-8", "Access-Control-Allow-Origin": "*"},
				body: `src="/docs/assets/redoc.standalone.js"`},
			{name: "trailing slash", method: "GET", path: "/docs/", status: http.StatusOK, body: "redoc.standalone.js"},
			{name: "event catalog", method: "GET", path: "/docs/events", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/html; charset=utf-8"}, body: "asyncapi.standalone.js"},
			{name: "HEAD of a page", method: "HEAD", path: "/docs", status: http.StatusOK},
			{name: "renderer bundle", method: "GET", path: "/docs/assets/redoc.standalone.js", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/javascript; charset=utf-8", "Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"}},
			{name: "stylesheet", method: "GET", path: "/docs/assets/asyncapi.min.css", status: http.StatusOK,
				want: map[string]string{"Content-Type": "text/css; charset=utf-8"}},
			{name: "bundle versions", method: "GET", path: "/docs/assets/MANIFEST", status: http.StatusOK, body: "redoc@"},
			{name: "unknown asset", method: "GET", path: "/docs/assets/nope.js", status: http.StatusNotFound, body: `"Not found."`},
			{name: "unknown docs page", method: "GET", path: "/docs/nope", status: http.StatusNotFound, body: `"Not found."`},
			{name: "asset path escape", method: "GET", path: "/docs/assets/../../openapi.yaml", status: http.StatusNotFound, body: `"Not found."`},
			{name: "POST is not a docs method", method: "POST", path: "/docs", status: http.StatusNotFound,
				want: map[string]string{"Content-Type": "application/json"}},
			{name: "preflight for the OpenAPI document", method: "OPTIONS", path: "/openapi.yaml", header: preflight("GET"),
				status: http.StatusNoContent, want: map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, HEAD"}},
			{name: "preflight for the AsyncAPI document", method: "OPTIONS", path: "/asyncapi.yaml", header: preflight("GET"),
				status: http.StatusNoContent, want: map[string]string{"Access-Control-Allow-Origin": "*"}},
			{name: "preflight for a docs asset", method: "OPTIONS", path: "/docs/assets/redoc.standalone.js", header: preflight("GET"),
				status: http.StatusNoContent, want: map[string]string{"Access-Control-Allow-Origin": "*"}},
			{name: "a write is never allowed cross-origin", method: "OPTIONS", path: "/openapi.yaml", header: preflight("DELETE"),
				status: http.StatusMethodNotAllowed, want: map[string]string{"Access-Control-Allow-Origin": ""}},
			{name: "the API itself has no CORS", method: "GET", path: "/api/company-channels", status: http.StatusUnauthorized,
				want: map[string]string{"Access-Control-Allow-Origin": ""}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				got := raw(t, h, tc.method, tc.path, tc.header)
				if got.status != tc.status {
					t.Fatalf("status %d, want %d (%s)", got.status, tc.status, got.body)
				}
				for k, v := range tc.want {
					if got.header.Get(k) != v {
						t.Errorf("%s: %q, want %q", k, got.header.Get(k), v)
					}
				}
				if !bytes.Contains(got.body, []byte(tc.body)) {
					t.Errorf("body does not contain %q: %.300s", tc.body, got.body)
				}
				if got.status >= 400 && !json.Valid(got.body) {
					t.Errorf("error answer is not the API's JSON: %s", got.body)
				}
			})
		}

		// The documents keep their contract answers (validated by Do) and gain CORS.
		for path, doc := range map[string][]byte{"/openapi.yaml": openapi.Document, "/asyncapi.yaml": asyncapi.Document} {
			resp := h.Do(apitest.Request{Method: "GET", Path: path, Header: http.Header{"Origin": {"https://tools.example"}}})
			if resp.Status != http.StatusOK || !bytes.Equal(resp.Body, doc) || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("GET %s: %d, CORS %q, body equal %v", path, resp.Status, resp.Header.Get("Access-Control-Allow-Origin"), bytes.Equal(resp.Body, doc))
			}
		}

		// A bundle revalidates by ETag: the second load costs a 304 and no body.
		first := raw(t, h, "GET", "/docs/assets/asyncapi.standalone.js", nil)
		etag := first.header.Get("ETag")
		if etag == "" {
			t.Fatal("no ETag on a bundle")
		}
		again := raw(t, h, "GET", "/docs/assets/asyncapi.standalone.js", http.Header{"If-None-Match": {etag}})
		if again.status != http.StatusNotModified || len(again.body) != 0 {
			t.Errorf("revalidation: %d with %d bytes", again.status, len(again.body))
		}
	})
}

// The pages may load only what the gateway serves: every src and href is a path on this host that
// answers 200, and the Content-Security-Policy forbids any other source.
func TestPagesLoadNothingFromAnotherHost(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{})
	attr := regexp.MustCompile(`(?:src|href)="([^"]*)"`)
	for _, page := range []string{"/docs", "/docs/events"} {
		got := raw(t, h, "GET", page, nil)
		policy := got.header.Get("Content-Security-Policy")
		for _, directive := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "img-src 'self' data:"} {
			if !strings.Contains(policy, directive) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", page, policy, directive)
			}
		}
		// Only the AsyncAPI parser needs eval.
		if eval := strings.Contains(policy, "'unsafe-eval'"); eval != (page == "/docs/events") {
			t.Errorf("%s: 'unsafe-eval' in the policy is %v", page, eval)
		}
		refs := attr.FindAllSubmatch(got.body, -1)
		if len(refs) == 0 {
			t.Fatalf("%s references nothing", page)
		}
		for _, m := range refs {
			ref := string(m[1])
			if strings.HasPrefix(ref, "#") {
				if !bytes.Contains(got.body, []byte(`id="`+ref[1:]+`"`)) {
					t.Errorf("%s links to %s, which is not on the page", page, ref)
				}
				continue
			}
			if !strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, "//") {
				t.Errorf("%s references %q, not a path on this host", page, ref)
				continue
			}
			if a := raw(t, h, "GET", ref, nil); a.status != http.StatusOK {
				t.Errorf("%s references %s, which answers %d", page, ref, a.status)
			}
		}
	}
}
