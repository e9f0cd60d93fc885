package official_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
)

// documentProvider is a provider endpoint that checks every request of the
// client against the provider's published document (through the
// simulator's validator, which shares no type with the client) and keeps
// the send bodies.
type documentProvider struct {
	t       *testing.T
	doc     *providersim.Document
	mu      sync.Mutex
	sends   [][]byte
	uploads int
}

// requests are the sends and uploads the provider has seen.
func (p *documentProvider) requests() (sends, uploads int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sends), p.uploads
}

func (p *documentProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := p.doc.ValidateAuthorization(r.Header.Get("Authorization")); err != nil {
		p.t.Errorf("%s %s: Authorization: %v", r.Method, r.URL.Path, err)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		body, _ := io.ReadAll(r.Body)
		if err := p.doc.ValidateRequest(providersim.OpSendMessage, body); err != nil {
			p.t.Errorf("send outside the document: %v\n%s", err, body)
		}
		p.mu.Lock()
		p.sends = append(p.sends, body)
		p.mu.Unlock()
		_, _ = io.WriteString(w, `{"messaging_product":"whatsapp","contacts":[{"input":"5511977776666","wa_id":"5511977776666"}],"messages":[{"id":"wamid.X"}]}`)
	case strings.HasSuffix(r.URL.Path, "/media"):
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			p.t.Errorf("upload: %v", err)
			return
		}
		if err := p.doc.ValidateUploadForm(r.MultipartForm); err != nil || r.FormValue("messaging_product") != "whatsapp" || r.MultipartForm.File["file"] == nil {
			p.t.Errorf("upload outside the document: %v %v", err, r.MultipartForm.Value)
		}
		p.mu.Lock()
		p.uploads++
		p.mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"4490709327384033"}`)
	default:
		http.NotFound(w, r)
	}
}

// TestClientRequestsFitTheDocument: every send the client can build is a
// valid request of the provider's document, and carries what it should.
func TestClientRequestsFitTheDocument(t *testing.T) {
	t.Parallel()
	p := &documentProvider{t: t, doc: providersim.MustLoadDocument()}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	acc := &channels.ProviderAccount{BaseURL: srv.URL + "/v23.0", PhoneNumberID: "111", BusinessAccountID: "222", AccessToken: "EAAtok"}
	ch := channels.Channel{ID: 1, TypeID: channels.OfficialChatapp, ProviderAccount: acc}
	client := official.NewClient(official.ClientOptions{})
	tr := official.NewTransport(client)
	pdf := messaging.MediaBytes("Fatura Abril.pdf", "application/pdf", []byte("%PDF-1.4"))
	png := messaging.MediaBytes("foto.png", "image/png", []byte("\x89PNG\r\n\x1a\n"))
	body := func(params ...string) []messaging.TemplateParam {
		out := make([]messaging.TemplateParam, len(params))
		for i, v := range params {
			out[i] = messaging.TemplateParam{Text: v}
		}
		return out
	}
	cases := []struct {
		name string
		out  messaging.Outbound
		// want are fragments the request must contain.
		want []string
	}{
		{"text", messaging.Outbound{MessageID: 7, ContactKey: "5511977776666", Text: "Olá"},
			[]string{`"type":"text"`, `"text":{"body":"Olá"}`, `"biz_opaque_callback_data":"7"`, `"recipient_type":"individual"`}},
		{"text with preview", messaging.Outbound{MessageID: 8, ContactKey: "5511977776666", Text: "veja https://x.test/p"},
			[]string{`"preview_url":true`}},
		{"image by id with caption", messaging.Outbound{MessageID: 9, ContactKey: "5511977776666", Text: "legenda", Media: png},
			[]string{`"type":"image"`, `"image":{"id":"4490709327384033","caption":"legenda"}`}},
		{"audio by id", messaging.Outbound{MessageID: 10, ContactKey: "5511977776666", Media: messaging.MediaBytes("a.ogg", "audio/ogg", []byte("OggS"))},
			[]string{`"audio":{"id":"4490709327384033"}`}},
		{"video by id", messaging.Outbound{MessageID: 11, ContactKey: "5511977776666", Media: messaging.MediaBytes("v.mp4", "video/mp4", []byte("x"))},
			[]string{`"video":{"id":"4490709327384033"}`}},
		{"document keeps its file name", messaging.Outbound{MessageID: 12, ContactKey: "5511977776666", Text: "sua fatura", Media: pdf},
			[]string{`"document":{"id":"4490709327384033","caption":"sua fatura","filename":"Fatura Abril.pdf"}`}},
		{"template with positional parameters", messaging.Outbound{MessageID: 13, ContactKey: "5511977776666", Template: &messaging.TemplateSend{
			Name: "order_update", Language: "pt_BR", Components: []messaging.TemplateComponentParams{{Type: "body", Params: body("Ana", "#4471")}}}},
			[]string{`"template":{"name":"order_update","language":{"code":"pt_BR"}`, `{"type":"body","parameters":[{"type":"text","text":"Ana"},{"type":"text","text":"#4471"}]}`}},
		{"template with named parameters", messaging.Outbound{MessageID: 14, ContactKey: "5511977776666", Template: &messaging.TemplateSend{
			Name: "welcome_named", Language: "pt_BR", Components: []messaging.TemplateComponentParams{
				{Type: "header", Params: []messaging.TemplateParam{{Name: "first_name", Text: "Ana"}}},
				{Type: "body", Params: []messaging.TemplateParam{{Name: "first_name", Text: "Ana"}, {Name: "coupon", Text: "X1"}}}}}},
			[]string{`{"type":"header","parameters":[{"type":"text","parameter_name":"first_name","text":"Ana"}]}`, `"parameter_name":"coupon"`}},
		{"template with an uploaded image header and a URL button", messaging.Outbound{MessageID: 15, ContactKey: "5511977776666", Template: &messaging.TemplateSend{
			Name: "promo_image", Language: "pt_BR", HeaderFormat: "IMAGE", HeaderMedia: png, Components: []messaging.TemplateComponentParams{
				{Type: "body", Params: body("Ana")}, {Type: "button", SubType: "url", Index: 0, Params: body("48213")}}}},
			[]string{`{"type":"header","parameters":[{"type":"image","image":{"id":"4490709327384033"}}]}`, `{"type":"button","sub_type":"url","index":"0","parameters":[{"type":"text","text":"48213"}]}`}},
		{"template with the template's own header by link", messaging.Outbound{MessageID: 16, ContactKey: "5511977776666", Template: &messaging.TemplateSend{
			Name: "clip", Language: "pt_BR", HeaderFormat: "VIDEO", HeaderMediaURL: "https://cdn.example.com/clip.mp4"}},
			[]string{`{"type":"video","video":{"link":"https://cdn.example.com/clip.mp4"}}`}},
		{"template with a DOCUMENT header and its file name", messaging.Outbound{MessageID: 17, ContactKey: "5511977776666", Template: &messaging.TemplateSend{
			Name: "invoice_ready", Language: "pt_BR", HeaderFormat: "DOCUMENT", HeaderMedia: pdf, Components: []messaging.TemplateComponentParams{{Type: "body", Params: body("Ana", "#1")}}}},
			[]string{`{"type":"document","document":{"id":"4490709327384033","filename":"Fatura Abril.pdf"}}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := p.requests()
			// The hand-off is recorded once, after every upload and before
			// the send: a crash before it must leave the message unsent.
			handOffs := 0
			tc.out.HandOff = func(context.Context) error {
				handOffs++
				if sends, _ := p.requests(); sends != before {
					t.Error("hand-off recorded after the send request")
				}
				return nil
			}
			res, err := tr.Send(context.Background(), ch, tc.out)
			if err != nil || res.ExternalID != "wamid.X" {
				t.Fatalf("%+v %v", res, err)
			}
			if handOffs != 1 {
				t.Fatalf("hand-off recorded %d times, want once", handOffs)
			}
			p.mu.Lock()
			sent := string(p.sends[before])
			p.mu.Unlock()
			for _, w := range tc.want {
				if !strings.Contains(sent, w) {
					t.Errorf("request lacks %s\n%s", w, sent)
				}
			}
		})
	}
	// Uploads come before the hand-off; a hand-off that cannot be recorded
	// stops the send before its request, and its error comes back as it is.
	t.Run("hand-off refused", func(t *testing.T) {
		sends, uploads := p.requests()
		refusal := errors.New("not recorded")
		_, err := tr.Send(context.Background(), ch, messaging.Outbound{MessageID: 18, ContactKey: "5511977776666", Media: pdf,
			HandOff: func(context.Context) error {
				if _, u := p.requests(); u != uploads+1 {
					t.Errorf("hand-off before the upload (%d uploads)", u-uploads)
				}
				return refusal
			}})
		if !errors.Is(err, refusal) {
			t.Fatalf("err %v, want the hand-off's", err)
		}
		if now, _ := p.requests(); now != sends {
			t.Fatal("a send request was made without its hand-off")
		}
	})
	// A reply: the client's context object.
	_, _, err := client.SendMessage(context.Background(), acc, official.SendRequest{RecipientType: "individual", To: "5511977776666", Type: "text",
		Context: &official.MessageContext{MessageID: "wamid.earlier"}, Text: &official.TextBody{Body: "respondendo"}})
	if err != nil || !strings.Contains(string(p.sends[len(p.sends)-1]), `"context":{"message_id":"wamid.earlier"}`) {
		t.Fatalf("reply: %v %s", err, p.sends[len(p.sends)-1])
	}

	// Edit and revoke-for-everyone: the provider has neither; answered
	// locally, nothing sent.
	n := len(p.sends)
	target := messaging.Target{ExternalID: "wamid.X", ContactKey: "5511977776666"}
	if err := tr.Edit(context.Background(), ch, target, "novo"); fault.KindOf(err) != fault.Rule ||
		fault.As(err).Message != "Editing sent messages is not available on the official channel" {
		t.Errorf("edit: %v", err)
	}
	if err := tr.Revoke(context.Background(), ch, target); fault.KindOf(err) != fault.Rule ||
		fault.As(err).Message != "Revoking sent messages is not available on the official channel" {
		t.Errorf("revoke: %v", err)
	}
	if len(p.sends) != n {
		t.Errorf("edit or revoke reached the provider")
	}
}
