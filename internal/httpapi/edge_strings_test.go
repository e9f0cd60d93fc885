package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

// poisoned is a request whose one string input carries text that may not
// be stored, and what the operation must answer.
type poisoned struct {
	name    string
	req     apitest.Request
	status  int
	message string
}

// poisons are the texts refused in every string input: a NUL byte (which
// PostgreSQL cannot store and which reached SQL as bun's error marker) and
// invalid UTF-8. Header values cannot carry NUL over HTTP/1.1.
var poisons = []struct{ name, text string }{{"NUL", "a\x00b"}, {"invalid UTF-8", "a\xffb"}}

// poisonedRequests builds, from the document, one request per string input
// of every operation (path, query and header parameters, JSON body members,
// multipart text parts) and per poison, so a new operation or parameter is
// covered without touching this test.
func poisonedRequests(t *testing.T, doc *openapi3.T, token string) []poisoned {
	var out []poisoned
	paths := doc.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			status := 422
			if v, ok := op.Extensions["x-validation-status"].(float64); ok {
				status = int(v)
			}
			params := append(append(openapi3.Parameters{}, item.Parameters...), op.Parameters...)
			fill := func(poisonName, poison string) string {
				return regexp.MustCompile(`\{[^}]+\}`).ReplaceAllStringFunc(path, func(m string) string {
					if m[1:len(m)-1] == poisonName {
						return url.PathEscape(poison)
					}
					return "1"
				})
			}
			add := func(input, field, message string, req apitest.Request) {
				if op.Security == nil || len(*op.Security) > 0 {
					req.Token = token
				}
				req.Method = method
				if message == "" {
					message = fmt.Sprintf("The %s field is invalid.", strings.ReplaceAll(field, "_", " "))
				}
				out = append(out, poisoned{name: method + " " + path + " " + input, req: req, status: status, message: message})
			}
			for _, ref := range params {
				p := ref.Value
				msg, _ := p.Extensions["x-invalid-message"].(string)
				for _, poison := range poisons {
					switch p.In {
					case openapi3.ParameterInPath:
						add("path "+p.Name+" "+poison.name, p.Name, msg, apitest.Request{Path: fill(p.Name, poison.text)})
					case openapi3.ParameterInQuery:
						add("query "+p.Name+" "+poison.name, p.Name, msg, apitest.Request{Path: fill("", "") + "?" + url.Values{p.Name: {poison.text}}.Encode()})
						if p.Content.Get("application/json") != nil {
							add("query "+p.Name+" escaped NUL in JSON", p.Name, msg, apitest.Request{Path: fill("", "") + "?" + url.Values{p.Name: {`["a\u0000b"]`}}.Encode()})
						}
					case openapi3.ParameterInHeader:
						if poison.name != "NUL" {
							add("header "+p.Name+" "+poison.name, p.Name, msg, apitest.Request{Path: fill("", ""), Header: http.Header{http.CanonicalHeaderKey(p.Name): {poison.text}}})
						}
					}
				}
			}
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for ct, mt := range op.RequestBody.Value.Content {
				if mt.Schema == nil || mt.Schema.Value == nil {
					continue
				}
				props := mt.Schema.Value.Properties
				switch {
				case ct == "multipart/form-data":
					for name, prop := range props {
						if prop.Value.Format == "binary" {
							continue
						}
						msg, _ := prop.Value.Extensions["x-invalid-message"].(string)
						if msg == "" && prop.Value.Items != nil {
							msg, _ = prop.Value.Items.Value.Extensions["x-invalid-message"].(string)
						}
						for _, poison := range poisons {
							add("multipart part "+name+" "+poison.name, name, msg, multipartExample(t, fill("", ""), mt, name, poison.text))
						}
					}
				default: // JSON, and the provider webhook's application/*
					members := []string{"text"}
					if len(props) > 0 {
						members = members[:0]
						for name := range props {
							members = append(members, name)
						}
					}
					for _, name := range members {
						msg := ""
						if prop := props[name]; prop != nil {
							msg, _ = prop.Value.Extensions["x-invalid-message"].(string)
						}
						for _, poison := range poisons {
							// Raw invalid bytes, and a NUL the JSON way.
							text := strings.ReplaceAll(poison.text, "\x00", `\u0000`)
							body := `{"` + name + `":"` + text + `"}`
							req := apitest.Request{Path: fill("", ""), JSON: body, Header: http.Header{"Content-Type": {"application/json"}}}
							add("JSON member "+name+" "+poison.name, name, msg, req)
						}
					}
				}
			}
		}
	}
	return out
}

// multipartExample is the operation's multipart example with the text part
// name replaced by poison and the binary parts sent as a small PDF.
func multipartExample(t *testing.T, path string, mt *openapi3.MediaType, name, poison string) apitest.Request {
	example, ok := mt.Example.(map[string]any)
	if !ok {
		t.Fatalf("%s: the multipart body has no example to start from", path)
	}
	req := apitest.Request{Path: path, Form: map[string]string{}}
	for k, v := range example {
		if p := mt.Schema.Value.Properties[k]; p != nil && p.Value.Format == "binary" {
			req.FileField, req.FileName, req.FileType, req.FileContent = k, "a.pdf", "application/pdf", []byte("%PDF-1.4\n%%EOF\n")
			continue
		}
		switch v := v.(type) {
		case string:
			req.Form[k] = v
		case float64:
			req.Form[k] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			b, _ := json.Marshal(v)
			req.Form[k] = string(b)
		}
	}
	req.Form[name] = poison
	return req
}

// TestNoBadTextReachesStorage sends every string input of every operation
// with a NUL byte and with invalid UTF-8: each is refused with the
// operation's invalid-input status and the field's message, before any
// handler or query runs (the unauthenticated media and provider webhook
// routes included).
func TestNoBadTextReachesStorage(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		cases := poisonedRequests(t, doc, ten.Token)
		// The operations the issue found answering 500 are among them.
		for _, must := range []string{"GET /media/{token}/{filename} path token NUL", "GET /provider-webhooks/{phone_number_id} path phone_number_id NUL",
			"GET /api/chatapps query filter NUL"} {
			if !containsCase(cases, must) {
				t.Fatalf("no case %q", must)
			}
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(tc.req)
				if resp.Status != tc.status {
					t.Errorf("status %d, want %d: %.300s", resp.Status, tc.status, resp.Body)
					return
				}
				if got := resp.Map(t)["message"]; got != tc.message {
					t.Errorf("message %q, want %q", got, tc.message)
				}
			})
		}
		t.Logf("%d poisoned inputs refused", len(cases))
	})
}

func containsCase(cases []poisoned, name string) bool {
	for _, c := range cases {
		if c.name == name {
			return true
		}
	}
	return false
}
