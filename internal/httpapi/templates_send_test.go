package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// paramTexts flattens the text parameters of one component the provider
// received ("name=value" for named ones).
func paramTexts(req providersim.SendRequest, typ string) []string {
	var out []string
	for _, c := range req.Template.Components {
		if c.Type != typ {
			continue
		}
		for _, p := range c.Parameters {
			if p.Text == nil {
				continue
			}
			if p.ParameterName != "" {
				out = append(out, p.ParameterName+"="+*p.Text)
			} else {
				out = append(out, *p.Text)
			}
		}
	}
	return out
}

// TestTemplateVariables: positional values in order, named values by name
// (underscore keys ignored), a missing value becomes an empty text and the
// message is still sent; the stored text is the rendered body.
func TestTemplateVariables(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ofcSeedTemplates(t, e)
		cases := []struct {
			name     string
			body     map[string]any
			header   []string
			bodyArgs []string
			text     string
		}{
			{"positional, all given", map[string]any{"provider_template_id": e.template("order_update"), "variable_values": []string{"Ana", "#48213"}},
				nil, []string{"Ana", "#48213"}, "Olá Ana, o pedido #48213 saiu para entrega."},
			{"positional, one missing", map[string]any{"provider_template_id": e.template("order_update"), "variable_values": []string{"Ana"}},
				nil, []string{"Ana", ""}, "Olá Ana, o pedido  saiu para entrega."},
			{"positional, none given", map[string]any{"provider_template_id": e.template("order_update")},
				nil, []string{"", ""}, "Olá , o pedido  saiu para entrega."},
			{"positional, extra values ignored", map[string]any{"provider_template_id": e.template("order_update"), "variable_values": []string{"A", "B", "C"}},
				nil, []string{"A", "B"}, "Olá A, o pedido B saiu para entrega."},
			{"named, underscore key ignored", map[string]any{"provider_template_id": e.template("welcome_named"),
				"named_variable_values": map[string]string{"first_name": "Ana", "coupon": "X10", "_internal": "secret"}},
				[]string{"first_name=Ana"}, []string{"first_name=Ana", "coupon=X10", "_internal="}, "Oi Ana, seu cupom é X10 ()."},
			{"named, missing value", map[string]any{"provider_template_id": e.template("welcome_named"), "named_variable_values": map[string]string{"first_name": "Bia"}},
				[]string{"first_name=Bia"}, []string{"first_name=Bia", "coupon=", "_internal="}, "Oi Bia, seu cupom é  ()."},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := e.send(tc.body)
				if resp.Status != http.StatusOK {
					t.Fatalf("%d %s", resp.Status, resp.Body)
				}
				list := e.sent()
				got := list[len(list)-1]
				if fmt.Sprint(paramTexts(got.Request, "header")) != fmt.Sprint(tc.header) || fmt.Sprint(paramTexts(got.Request, "body")) != fmt.Sprint(tc.bodyArgs) {
					t.Fatalf("provider got header %q body %q", paramTexts(got.Request, "header"), paramTexts(got.Request, "body"))
				}
				m, err := e.h.App.Messaging.FindByExternalID(context.Background(), e.ch.ID, got.ID)
				if err != nil || m.Text != tc.text || m.TypeID != msgtype.Template {
					t.Fatalf("stored %+v %v", m, err)
				}
			})
		}

		// Multipart: one variable_values part and named values as JSON text.
		resp := e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token, Form: map[string]string{
			"platform": "ofc_chatapp", "sender_key": ofcSenderKey, "contact_key": ofcContactKey,
			"provider_template_id": strconv.FormatInt(e.template("order_update"), 10), "variable_values": "Zé", "enqueue": "false"}})
		if resp.Status != http.StatusOK {
			t.Fatalf("multipart template: %d %s", resp.Status, resp.Body)
		}
		list := e.sent()
		if got := paramTexts(list[len(list)-1].Request, "body"); fmt.Sprint(got) != "[Zé ]" {
			t.Fatalf("multipart values: %q", got)
		}
	})
}

// mediaServer serves header media test files on 127.0.0.1.
func mediaServer(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked-big.png":
			// No Content-Length: the limit is enforced while reading.
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(files["/img.png"][:64])
			_, _ = io.CopyN(w, zeros{}, messaging.ImageLimit)
			return
		case "/huge.pdf":
			w.Header().Set("Content-Length", strconv.Itoa(messaging.DocumentLimit+1))
			_, _ = w.Write([]byte("%PDF-1.4\n"))
			_, _ = io.CopyN(w, zeros{}, messaging.DocumentLimit+1-9)
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func mp4Bytes(brand string, size int) []byte {
	b := make([]byte, size)
	copy(b, []byte{0, 0, 0, 0x18})
	copy(b[4:], "ftyp"+brand)
	return b
}

func pdfBytes(size int) []byte {
	b := bytes.Repeat([]byte(" "), size)
	copy(b, "%PDF-1.4\n")
	return b
}

// TestTemplateHeaderMedia: header_media_url is fetched through the SSRF
// guard, checked against the header format (on the bytes) and its size
// limit; header_media_filename only for DOCUMENT headers; without a URL the
// template's own media is used.
func TestTemplateHeaderMedia(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ofcSeedTemplates(t, e)
		img := pngImage(t, 40, 40)
		bigImg := append(append([]byte{}, img...), make([]byte, messaging.ImageLimit+1-len(img))...)
		srv := mediaServer(t, map[string][]byte{
			"/img.png":  img,
			"/big.png":  bigImg,
			"/clip.mp4": mp4Bytes("mp42", 4096),
			"/clip.3gp": mp4Bytes("3gp5", 4096),
			"/big.mp4":  mp4Bytes("mp42", messaging.VideoLimit+1),
			"/doc.pdf":  pdfBytes(10_000),
			"/text.txt": []byte("just text"),
		})
		promo, clip, invoice, order := e.template("promo_image"), e.template("clip"), e.template("invoice_ready"), e.template("order_update")
		u := func(p string) string { return srv.URL + p }

		type want struct {
			status  int
			message string
			check   func(t *testing.T, req providersim.SendRequest)
		}
		headerParam := func(req providersim.SendRequest) providersim.TemplateParameter {
			for _, c := range req.Template.Components {
				if c.Type == "header" && len(c.Parameters) == 1 {
					return c.Parameters[0]
				}
			}
			return providersim.TemplateParameter{}
		}
		cases := []struct {
			name string
			body map[string]any
			want want
		}{
			{"image header from URL", map[string]any{"provider_template_id": promo, "header_media_url": u("/img.png"), "variable_values": []string{"Ana"}},
				want{200, "", func(t *testing.T, req providersim.SendRequest) {
					if p := headerParam(req); p.Type != "image" || p.Image == nil || p.Image.ID == "" {
						t.Fatalf("header %+v", p)
					}
				}}},
			{"image header, the template's own media", map[string]any{"provider_template_id": promo},
				want{200, "", func(t *testing.T, req providersim.SendRequest) {
					if p := headerParam(req); p.Image == nil || p.Image.Link != "https://cdn.example.com/promo.png" {
						t.Fatalf("header %+v", p)
					}
				}}},
			{"image over 5 MB", map[string]any{"provider_template_id": promo, "header_media_url": u("/big.png")}, want{509, "Images may not be greater than 5 MB", nil}},
			{"image over 5 MB without Content-Length", map[string]any{"provider_template_id": promo, "header_media_url": u("/chunked-big.png")}, want{509, "Images may not be greater than 5 MB", nil}},
			{"pdf for an image header", map[string]any{"provider_template_id": promo, "header_media_url": u("/doc.pdf")},
				want{509, "Header media must be an image (JPEG, PNG or WEBP) for the template's IMAGE header; header_media_url is application/pdf", nil}},
			{"mp4 video header", map[string]any{"provider_template_id": clip, "header_media_url": u("/clip.mp4")},
				want{200, "", func(t *testing.T, req providersim.SendRequest) {
					if p := headerParam(req); p.Type != "video" || p.Video == nil || p.Video.ID == "" {
						t.Fatalf("header %+v", p)
					}
				}}},
			{"3gpp video header", map[string]any{"provider_template_id": clip, "header_media_url": u("/clip.3gp")}, want{200, "", nil}},
			{"video over 16 MB", map[string]any{"provider_template_id": clip, "header_media_url": u("/big.mp4")}, want{509, "Videos may not be greater than 16 MB", nil}},
			{"text for a video header", map[string]any{"provider_template_id": clip, "header_media_url": u("/text.txt")},
				want{509, "Header media must be a video (MP4 or 3GPP) for the template's VIDEO header; header_media_url is text/plain", nil}},
			{"document header with a file name", map[string]any{"provider_template_id": invoice, "header_media_url": u("/doc.pdf"),
				"header_media_filename": "Fatura Abril.pdf", "variable_values": []string{"Ana", "#48213"}},
				want{200, "", func(t *testing.T, req providersim.SendRequest) {
					p := headerParam(req)
					if p.Type != "document" || p.Document == nil || p.Document.Filename != "Fatura Abril.pdf" || p.Document.ID == "" {
						t.Fatalf("header %+v", p)
					}
					if got := paramTexts(req, "button"); fmt.Sprint(got) != "[Ana]" {
						t.Fatalf("URL button parameters %q", got)
					}
				}}},
			{"document name derived from the URL", map[string]any{"provider_template_id": invoice, "header_media_url": u("/doc.pdf")},
				want{200, "", func(t *testing.T, req providersim.SendRequest) {
					if p := headerParam(req); p.Document == nil || p.Document.Filename != "doc.pdf" {
						t.Fatalf("header %+v", p)
					}
				}}},
			{"document over 100 MB", map[string]any{"provider_template_id": invoice, "header_media_url": u("/huge.pdf")}, want{509, "Documents may not be greater than 100 MB", nil}},
			{"file name for an image header", map[string]any{"provider_template_id": promo, "header_media_url": u("/img.png"), "header_media_filename": "x.png"},
				want{509, "header_media_filename is only accepted for templates with a DOCUMENT header", nil}},
			{"file name without URL", map[string]any{"provider_template_id": invoice, "header_media_filename": "x.pdf"},
				want{509, "header_media_filename is only accepted together with header_media_url", nil}},
			{"URL for a template without media header", map[string]any{"provider_template_id": order, "header_media_url": u("/img.png")},
				want{509, "header_media_url is only accepted for templates with an IMAGE, VIDEO or DOCUMENT header", nil}},
			{"URL that answers 404", map[string]any{"provider_template_id": promo, "header_media_url": u("/missing.png")},
				want{509, "header_media_url could not be fetched (HTTP 404)", nil}},
			{"URL to the metadata address", map[string]any{"provider_template_id": promo, "header_media_url": "http://169.254.169.254/latest/meta-data/x.png"},
				want{509, "header_media_url points to an address the service may not reach", nil}},
			{"URL to a private address", map[string]any{"provider_template_id": promo, "header_media_url": "http://10.1.2.3:8080/x.png"},
				want{509, "header_media_url points to an address the service may not reach", nil}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := len(e.sent())
				resp := e.send(tc.body)
				if resp.Status != tc.want.status {
					t.Fatalf("%d %s", resp.Status, resp.Body)
				}
				list := e.sent()
				if tc.want.status != 200 {
					if msg := resp.Map(t)["message"]; msg != tc.want.message {
						t.Fatalf("message %q, want %q", msg, tc.want.message)
					}
					if len(list) != before {
						t.Fatal("the provider received a message")
					}
					return
				}
				if len(list) != before+1 {
					t.Fatal("the provider received nothing")
				}
				if tc.want.check != nil {
					tc.want.check(t, list[len(list)-1].Request)
				}
			})
		}
	})
}
