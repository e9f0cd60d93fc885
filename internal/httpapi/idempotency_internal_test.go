package httpapi

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// TestRequestFingerprint: what counts as "the same request" for a key.
func TestRequestFingerprint(t *testing.T) {
	t.Parallel()
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
		return r
	}
	fp := func(r *http.Request) string {
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
	base := fp(jsonReq("/api/x", `{"a":1,"b":[1,2]}`))
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
		if got := fp(tc.req) == base; got != tc.same {
			t.Errorf("%s: same = %v, want %v", tc.name, got, tc.same)
		}
	}
	if fp(form("boundary-one", "PNG")) != fp(form("boundary-two", "PNG")) {
		t.Error("the same parts under another multipart boundary are another request")
	}
	if fp(form("boundary-one", "PNG")) == fp(form("boundary-one", "GIF")) {
		t.Error("another file is the same request")
	}
}
