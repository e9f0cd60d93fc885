package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/filestore"
	"github.com/chatmsg/gateway/internal/idempotency"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// TestRequestFingerprint: what counts as "the same request" for a key.
func TestRequestFingerprint(t *testing.T) {
	t.Parallel()
	contract, err := LoadContract(context.Background(), openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	jsonReq := func(path, body string) *http.Request {
		r, _ := http.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	form := func(boundary, file string) *http.Request {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if err := mw.SetBoundary(boundary); err != nil {
			t.Fatal(err)
		}
		_ = mw.WriteField("platform", "chatapp")
		w, _ := mw.CreateFormFile("file", "a.png")
		_, _ = w.Write([]byte(file))
		_ = mw.Close()
		r, _ := http.NewRequest("POST", "/api/api-send-message", &buf)
		r.Header.Set("Content-Type", mw.FormDataContentType())
		// As the edge reads it: into the spool.
		route, _, err := contract.FindRoute(r)
		if err != nil {
			t.Fatal(err)
		}
		f, err := readForm(r, route.Operation, filestore.Spool{Dir: t.TempDir()}, "100 MB")
		if err != nil || f.unreadable || f.problem != nil {
			t.Fatalf("read form: %v %v %v", err, f.unreadable, f.problem)
		}
		return f.install(r)
	}
	fp := func(t *testing.T, r *http.Request) string {
		t.Helper()
		s, err := requestFingerprint(r)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(r.Body); len(b) == 0 && r.ContentLength != 0 {
			t.Fatal("the body was consumed")
		}
		return s
	}
	base := fp(t, jsonReq("/api/x", `{"a":1,"b":[1,2]}`))
	cases := []struct {
		name string
		req  *http.Request
		same bool
	}{
		{"members reordered, spaced", jsonReq("/api/x", ` { "b": [1, 2], "a": 1 } `), true},
		{"another value", jsonReq("/api/x", `{"a":2,"b":[1,2]}`), false},
		{"array reordered", jsonReq("/api/x", `{"a":1,"b":[2,1]}`), false},
		{"another path", jsonReq("/api/y", `{"a":1,"b":[1,2]}`), false},
		{"another query", jsonReq("/api/x?z=1", `{"a":1,"b":[1,2]}`), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fp(t, tc.req) == base; got != tc.same {
				t.Errorf("same = %v, want %v", got, tc.same)
			}
		})
	}
	if fp(t, form("boundary-one", "PNG")) != fp(t, form("boundary-two", "PNG")) {
		t.Error("the same parts under another multipart boundary are another request")
	}
	if fp(t, form("boundary-one", "PNG")) == fp(t, form("boundary-one", "GIF")) {
		t.Error("another file is the same request")
	}
}

// TestIdempotentMiddlewareOutcomes drives the middleware around a stub
// handler: answers a retry must not see again (429, 5xx) release the key,
// and a repeat that outlasts the wait gets the documented 409 of its
// operation.
func TestIdempotentMiddlewareOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	contract, err := LoadContract(ctx, openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		if err := db.Migrate(ctx, slices.Concat(auth.Migrations, idempotency.Migrations)); err != nil {
			t.Fatal(err)
		}
		company, err := auth.NewService(db, clock.System).CreateCompany(ctx, "Acme")
		if err != nil {
			t.Fatal(err)
		}
		keys := idempotency.NewService(db, idempotency.Options{Wait: time.Millisecond})
		request := func(path, key string) *http.Request {
			r := httptest.NewRequest("POST", path, strings.NewReader(`{"name":"n","key":"5511988887777"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", key)
			route, _, err := contract.FindRoute(r)
			if err != nil {
				t.Fatal(err)
			}
			c := context.WithValue(r.Context(), operationKey, route.Operation)
			return r.WithContext(auth.WithPrincipal(c, auth.Principal{CompanyID: company}))
		}
		calls := 0
		answering := func(status int) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				writeJSON(w, status, map[string]any{"message": "stub"})
			})
		}
		serve := func(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			idempotent(keys, slog.New(slog.DiscardHandler), h).ServeHTTP(w, r)
			return w
		}

		for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable, 509} {
			calls = 0
			key := "released-" + strconv.Itoa(status)
			serve(answering(status), request("/api/chatapp-create", key))
			if w := serve(answering(http.StatusOK), request("/api/chatapp-create", key)); w.Code != http.StatusOK || calls != 2 || w.Header().Get("Idempotent-Replayed") != "" {
				t.Errorf("after a %d the retry answered %d with %d calls, want the work done again", status, w.Code, calls)
			}
		}

		// A first request still running (claimed, not finished) on another replica.
		blocked := func(t *testing.T, path string) *httptest.ResponseRecorder {
			r := request(path, "running-"+path)
			fp, err := requestFingerprint(r)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := keys.Begin(ctx, company, "running-"+path, fp); err != nil {
				t.Fatal(err)
			}
			return serve(answering(http.StatusOK), r)
		}
		for _, tc := range []struct{ name, path, body string }{
			{"connection create", "/api/chatapp-create", `{"message":"A request with this Idempotency-Key is still being processed; retry later."}`},
			{"send", "/api/api-send-message", `{"message":"A request with this Idempotency-Key is still being processed; retry later.","status":false}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				calls = 0
				w := blocked(t, tc.path)
				if w.Code != http.StatusConflict || strings.TrimSpace(w.Body.String()) != tc.body || calls != 0 {
					t.Errorf("while the first runs: %d %s (%d calls)", w.Code, w.Body, calls)
				}
			})
		}
	})
}
