package openapi_test

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// documentedMessage turns a kin-openapi request-validation error into the
// message the document assigns to it through its x- extensions: the
// reference reading of x-required-message, x-invalid-message and x-message.
func documentedMessage(err error, contentType string) string {
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		return ""
	}
	if p := reqErr.Parameter; p != nil {
		if errors.Is(reqErr.Err, openapi3filter.ErrInvalidRequired) {
			return extString(p.Extensions, "x-required-message")
		}
		return extString(p.Extensions, "x-invalid-message")
	}
	var schemaErr *openapi3.SchemaError
	if errors.As(reqErr.Err, &schemaErr) {
		// An allOf/oneOf failure wraps the failures of its branches.
		for schemaErr.SchemaField == "allOf" {
			var inner *openapi3.SchemaError
			if !errors.As(schemaErr.Origin, &inner) {
				break
			}
			schemaErr = inner
		}
		// A oneOf picked by a discriminator (the send body's rules per
		// platform): a missing or unknown discriminator is the property's
		// own required or invalid message; otherwise the body's own fields
		// answer before the picked branch's rules.
		if d := schemaErr.Schema.Discriminator; d != nil {
			switch schemaErr.SchemaField {
			case "discriminator":
				prop := schemaErr.Schema.Properties[d.PropertyName]
				if prop == nil || prop.Value == nil {
					return ""
				}
				if schemaErr.Value == nil {
					return extString(prop.Value.Extensions, "x-required-message")
				}
				return extString(prop.Value.Extensions, "x-invalid-message")
			case "oneOf":
				plain := *schemaErr.Schema
				plain.OneOf, plain.Discriminator = nil, nil
				var inner *openapi3.SchemaError
				if err := plain.VisitJSON(schemaErr.Value, openapi3.VisitAsRequest()); err != nil && errors.As(err, &inner) {
					schemaErr = inner
				} else if errors.As(schemaErr.Origin, &inner) {
					schemaErr = inner
				}
			}
		}
		switch schemaErr.SchemaField {
		case "required":
			path := schemaErr.JSONPointer()
			prop := schemaErr.Schema.Properties[path[len(path)-1]]
			if prop != nil && prop.Value != nil {
				return extString(prop.Value.Extensions, "x-required-message")
			}
			return ""
		case "anyOf", "oneOf", "not":
			return extString(schemaErr.Schema.Extensions, "x-message")
		default:
			return extString(schemaErr.Schema.Extensions, "x-invalid-message")
		}
	}
	var parseErr *openapi3filter.ParseError
	if errors.As(reqErr.Err, &parseErr) && len(parseErr.Path()) > 0 {
		name, _ := parseErr.Path()[0].(string)
		mt := reqErr.RequestBody.Content.Get(contentType)
		if mt != nil && mt.Schema != nil {
			if prop := mt.Schema.Value.Properties[name]; prop != nil {
				return extString(prop.Value.Extensions, "x-invalid-message")
			}
		}
	}
	return ""
}

func extString(ext map[string]any, key string) string {
	s, _ := ext[key].(string)
	return s
}

func multipartBody(t *testing.T, fields map[string][]string, file string) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for name, values := range fields {
		for _, v := range values {
			if err := w.WriteField(name, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if file != "" {
		fw, err := w.CreateFormFile("file", file)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write([]byte("%PDF-1.4 test"))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), &buf
}

// TestValidationMessages sends requests through the same validator the
// server uses and checks that each failure leads to the message the API
// document prescribes (or that valid requests pass, multipart included).
func TestValidationMessages(t *testing.T) {
	t.Parallel()
	doc := load(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name        string
		method, url string
		contentType string
		body        string
		multipart   map[string][]string
		file        string
		want        string // "" = valid
	}
	q := func(s string) string { return url.QueryEscape(s) }
	cases := []tc{
		{name: "send ok json", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"platform":"ofc_chatapp","sender_key":"5511999990001","contact_key":"5511977776666","provider_template_id":31,"named_variable_values":{"first_name":"Ana"}}`},
		{name: "send missing platform", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"sender_key":"5511999990001","contact_key":"5511977776666","text":"hi"}`, want: "Platform is required"},
		{name: "send missing sender", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"platform":"chatapp","contact_key":"5511977776666","text":"hi"}`, want: "Sender key is required"},
		{name: "send missing contact", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"platform":"chatapp","sender_key":"5511988887777","text":"hi"}`, want: "Contact key is required"},
		{name: "send bad platform", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"platform":"sms","sender_key":"1","contact_key":"2","text":"hi"}`, want: "Platform must be chatapp or ofc_chatapp"},
		{name: "send bad header url", method: "POST", url: "/api/api-send-message", contentType: "application/json",
			body: `{"platform":"ofc_chatapp","sender_key":"1","contact_key":"2","provider_template_id":3,"header_media_url":"ftp://x/y"}`,
			want: "Header media url must be a valid http or https URL"},
		{name: "send ok multipart", method: "POST", url: "/api/api-send-message",
			multipart: map[string][]string{"platform": {"chatapp"}, "sender_key": {"5511988887777"}, "contact_key": {"5511977776666"},
				"contact_is_group": {"false"}, "enqueue": {"true"}, "variable_values": {"Ana", "#1"}, "named_variable_values": {`{"a":"b"}`}},
			file: "invoice.pdf"},
		{name: "send multipart bad bool", method: "POST", url: "/api/api-send-message",
			multipart: map[string][]string{"platform": {"chatapp"}, "sender_key": {"5511988887777"}, "contact_key": {"5511977776666"},
				"contact_is_group": {"yes"}}, file: "invoice.pdf", want: "contact_is_group must be true or false"},
		{name: "send multipart missing platform", method: "POST", url: "/api/api-send-message",
			multipart: map[string][]string{"sender_key": {"5511988887777"}, "contact_key": {"5511977776666"}},
			file:      "invoice.pdf", want: "Platform is required"},
		{name: "edit missing text", method: "POST", url: "/api/edit-message", contentType: "application/json",
			body: `{"id":1}`, want: "Text is required"},
		{name: "edit missing id", method: "POST", url: "/api/edit-message", contentType: "application/json",
			body: `{"text":"x"}`, want: "Id is required"},
		{name: "revoke ids not array", method: "POST", url: "/api/revoke-messages", contentType: "application/json",
			body: `{"ids":5}`, want: "Ids is required and must be an array"},
		{name: "revoke ids missing", method: "POST", url: "/api/revoke-messages", contentType: "application/json",
			body: `{"scope":"me"}`, want: "Ids is required and must be an array"},
		{name: "revoke bad scope", method: "POST", url: "/api/revoke-messages", contentType: "application/json",
			body: `{"ids":[1],"scope":"everyone"}`, want: "Scope must be me or all"},
		{name: "qrcode neither id nor key", method: "POST", url: "/api/chatapp-qrcode", contentType: "application/json",
			body: `{"os":"Windows","browser":"Chrome"}`, want: "Id or key is required"},
		{name: "qrcode missing os", method: "POST", url: "/api/chatapp-qrcode", contentType: "application/json",
			body: `{"id":7,"browser":"Chrome"}`, want: "Os is required"},
		{name: "qrcode ok by key", method: "POST", url: "/api/chatapp-qrcode", contentType: "application/json",
			body: `{"key":"5511988887777","os":"Windows","browser":"Chrome"}`},
		{name: "delete empty", method: "POST", url: "/api/chatapp-delete", contentType: "application/json",
			body: `{}`, want: "Id or key is required"},
		{name: "delete bad key", method: "POST", url: "/api/chatapp-delete", contentType: "application/json",
			body: `{"key":"+55 11 98888-7777"}`, want: "Key must be digits only with country code (10 to 15 digits)"},
		{name: "check missing numbers", method: "POST", url: "/api/chatapp-check-on-chatapp", contentType: "application/json",
			body: `{"id":7}`, want: "Numbers is required"},
		{name: "create missing name", method: "POST", url: "/api/chatapp-create", contentType: "application/json",
			body: `{"key":"5511988887777"}`, want: "Name is required"},
		{name: "list chatapps ok", method: "GET", url: "/api/chatapps?logged=true&orderBy=name&orderMode=DESC&created_at=" + q(`["2026-11-01","2026-11-22"]`)},
		{name: "list chatapps bad range", method: "GET", url: "/api/chatapps?created_at=" + q(`["2026-11-01"]`),
			want: "Created at must be a JSON array [start, end] of dates"},
		{name: "webhook create ok", method: "POST", url: "/api/channel-webhooks", contentType: "application/json",
			body: `{"name":"CRM","url":"https://hooks.example.com/x","company_channel_ids":null}`},
		{name: "webhook create missing url", method: "POST", url: "/api/channel-webhooks", contentType: "application/json",
			body: `{"name":"CRM"}`, want: "Url is required"},
		{name: "webhook create bad url", method: "POST", url: "/api/channel-webhooks", contentType: "application/json",
			body: `{"name":"CRM","url":"not a url"}`, want: "Url must be a valid http or https URL"},
		{name: "webhook create long name", method: "POST", url: "/api/channel-webhooks", contentType: "application/json",
			body: `{"name":"` + strings.Repeat("n", 151) + `","url":"https://hooks.example.com/x"}`, want: "Name is required and may not be greater than 150 characters"},
		{name: "webhook update bad id", method: "PUT", url: "/api/channel-webhooks/abc", contentType: "application/json",
			body: `{}`, want: "Id must be an integer"},
		{name: "templates missing channel", method: "GET", url: "/api/provider-templates/for-channel",
			want: "Company channel id is required"},
		{name: "templates bad channel", method: "GET", url: "/api/provider-templates/for-channel?company_channel_id=x",
			want: "Company channel id must be an integer"},
		{name: "conversations ok", method: "GET", url: "/api/contact-channels?orderMode=asc&tags_operation=XOR&with=" + q(`["contact","providerOpenedWindow"]`) +
			"&tags_ids=" + q(`{"contactTags":[1,2]}`) + "&status_ids=" + q(`[1,2]`) + "&last_message_at=" + q(`["2026-11-01T00:00:00-03:00","2026-11-22"]`)},
		{name: "conversations bad with", method: "GET", url: "/api/contact-channels?with=" + q(`["everything"]`),
			want: "With must be a JSON array of contact, tags, sector, user, providerOpenedWindow"},
		{name: "conversations bad perPage", method: "GET", url: "/api/contact-channels?perPage=501",
			want: "Per page must be an integer from 1 to 500"},
		{name: "upload missing file", method: "POST", url: "/api/provider-templates/upload-send-media",
			multipart: map[string][]string{"provider_account_id": {"4"}}, want: "File is required"},
		{name: "upload ok", method: "POST", url: "/api/provider-templates/upload-send-media",
			multipart: map[string][]string{"provider_account_id": {"4"}}, file: "invoice.pdf"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var body *bytes.Buffer
			contentType := c.contentType
			if c.multipart != nil {
				contentType, body = multipartBody(t, c.multipart, c.file)
			} else {
				body = bytes.NewBufferString(c.body)
			}
			req := httptest.NewRequest(c.method, "http://127.0.0.1"+c.url, body)
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			route, pathParams, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("route: %v", err)
			}
			err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
				Request: req, PathParams: pathParams, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
			})
			if c.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q, request passed validation", c.want)
			}
			if got := documentedMessage(err, strings.SplitN(contentType, ";", 2)[0]); got != c.want {
				t.Fatalf("message = %q, want %q (error: %v)", got, c.want, err)
			}
		})
	}
}
