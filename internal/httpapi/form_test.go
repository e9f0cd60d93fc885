package httpapi_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// formPart is one part of a hand-built multipart body.
type formPart struct {
	name, fileName, content string
}

// rawForm builds a multipart body part by part, in order, for the shapes
// apitest's form helper cannot make (many parts, a text field sent as a
// file, a body cut off).
func rawForm(t *testing.T, parts []formPart, cut bool) ([]byte, http.Header) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.fileName != "" {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, p.name, p.fileName))
			h.Set("Content-Type", "application/octet-stream")
		} else {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, p.name))
		}
		w, err := mw.CreatePart(h)
		if err == nil {
			_, err = w.Write([]byte(p.content))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !cut {
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes(), http.Header{"Content-Type": {mw.FormDataContentType()}}
}

// TestMultipartFormAtTheEdge: the edge reads a multipart body once, part by
// part, into its spool. Its bounds answer 413 like a body over its size; a
// text field sent as a file is still judged as text; a form cut off is
// unreadable; and no request, accepted or refused, leaves a file in the
// spool.
func TestMultipartFormAtTheEdge(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		send := []formPart{{"platform", "", "chatapp"}, {"sender_key", "", "5511988887777"}, {"contact_key", "", "5511977776666"},
			{"contact_is_group", "", "false"}}
		with := func(more ...formPart) []formPart { return append(append([]formPart{}, send...), more...) }
		many := with()
		for range 1000 {
			many = append(many, formPart{"variable_values", "", "x"})
		}
		long := strings.Repeat("a", 70000)
		// The answer a text over its length gets as a plain field.
		body, hdr := rawForm(t, with(formPart{"text", "", long}), false)
		asField := h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token, JSON: body, Header: hdr})
		if asField.Status != 509 {
			t.Fatalf("a 70,000-character text: %d %s", asField.Status, asField.Body)
		}

		cases := []struct {
			name    string
			parts   []formPart
			cut     bool
			status  int
			message string
		}{
			{"over 1,000 parts", many, false, 413, "A form may not have more than 1000 parts"},
			{"text parts over 1 MB in all", with(formPart{"text", "", strings.Repeat("a", 400<<10)},
				formPart{"named_variable_values", "", strings.Repeat("b", 400<<10)}, formPart{"header_media_url", "", strings.Repeat("c", 400<<10)}),
				false, 413, "The form's text parts may not be greater than 1 MB in all"},
			{"a text field sent as a file is judged as text", with(formPart{"text", "t.txt", long}), false, 509, asField.Map(t)["message"].(string)},
			{"a form cut off", with(formPart{"file", "a.pdf", "%PDF-1.4 …"}), true, 509, "The multipart body could not be read."},
			{"a file and a refusal on the fields", []formPart{{"platform", "", "chatapp"}, {"file", "a.pdf", "%PDF-1.4"}}, false, 509, "Sender key is required"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				body, hdr := rawForm(t, tc.parts, tc.cut)
				resp := h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: ten.Token, JSON: body, Header: hdr})
				if resp.Status != tc.status || resp.Map(t)["message"] != tc.message {
					t.Errorf("%d %.300s, want %d %q", resp.Status, resp.Body, tc.status, tc.message)
				}
			})
		}
		spool := filepath.Join(h.App.Config.DataDir, "spool")
		left, err := os.ReadDir(spool)
		if err != nil {
			t.Fatalf("the spool %s: %v", spool, err)
		}
		if len(left) > 0 {
			t.Errorf("%d files left in the spool after the requests, e.g. %s", len(left), left[0].Name())
		}
	})
}
