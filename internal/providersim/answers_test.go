package providersim_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/internal/providersim"
)

// receiver is a webhook endpoint on loopback that keeps what it got.
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	sigs   []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, b)
	rc.sigs = append(rc.sigs, r.Header.Get("X-Hub-Signature-256"))
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// call makes one provider call and returns its status and body.
func call(t *testing.T, srv *httptest.Server, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestAnswersAndWebhooksFitTheDocument: every answer of the four operations
// and every webhook the simulator POSTs (message kinds, receipts of each
// status) validate against the provider's document.
func TestAnswersAndWebhooksFitTheDocument(t *testing.T) {
	t.Parallel()
	doc := providersim.MustLoadDocument()
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	sim := providersim.New(providersim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	ctl := providersim.Control{URL: srv.URL, HTTP: srv.Client()}
	ctx := context.Background()
	if err := ctl.AddAccount(ctx, providersim.Account{PhoneNumberID: "111", BusinessAccountID: "222", AccessToken: "tok", AppSecret: "sec",
		DisplayPhoneNumber: "5511999990001", WebhookURL: hook.URL}); err != nil {
		t.Fatal(err)
	}
	sim.SeedTemplates("222", providersim.DemoTemplates())

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("messaging_product", "whatsapp")
	fw, _ := mw.CreateFormFile("file", "a.png")
	_, _ = fw.Write([]byte("\x89PNG\r\n\x1a\nxxxx"))
	_ = mw.Close()
	status, up := call(t, srv, "POST", "/111/media", mw.FormDataContentType(), form.Bytes())
	if status != 200 {
		t.Fatalf("upload: %d %s", status, up)
	}
	if err := doc.ValidateResponse(providersim.OpUploadMedia, up); err != nil {
		t.Errorf("upload answer: %v", err)
	}
	mediaID := strings.Split(string(up), `"`)[3]
	// The two sends are the messages the receipts below are for, so a failed
	// request stops the rest.
	for _, tc := range []struct {
		name             string
		op, method, path string
		body             string
	}{
		{"send text with callback data", providersim.OpSendMessage, "POST", "/111/messages", `{"messaging_product":"whatsapp","recipient_type":"individual","to":"5511977776666","type":"text","text":{"body":"oi"},"biz_opaque_callback_data":"42"}`},
		{"send image by id", providersim.OpSendMessage, "POST", "/111/messages", `{"messaging_product":"whatsapp","recipient_type":"individual","to":"5511977776666","type":"image","image":{"id":"` + mediaID + `"}}`},
		{"retrieve media", providersim.OpRetrieveMedia, "GET", "/" + mediaID, ""},
		{"retrieve media of a phone number", providersim.OpRetrieveMedia, "GET", "/" + mediaID + "?phone_number_id=111", ""},
		{"list templates with a limit", providersim.OpListTemplates, "GET", "/222/message_templates?limit=2", ""},
		{"list templates by name", providersim.OpListTemplates, "GET", "/222/message_templates?name=order_update", ""},
	} {
		if !t.Run(tc.name, func(t *testing.T) {
			ct := ""
			if tc.body != "" {
				ct = "application/json"
			}
			status, b := call(t, srv, tc.method, tc.path, ct, []byte(tc.body))
			if status != 200 {
				t.Fatalf("%d %s", status, b)
			}
			if err := doc.ValidateResponse(tc.op, b); err != nil {
				t.Errorf("answer: %v", err)
			}
		}) {
			t.FailNow()
		}
	}

	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nxxxx"))
	for _, in := range []providersim.InboundRequest{
		{Text: "Olá"},
		{Text: "resposta", ReplyTo: "wamid.earlier"},
		{Type: "image", Media: &providersim.InboundMedia{MimeType: "image/png", Caption: "foto", DataBase64: png}},
		{Type: "document", Media: &providersim.InboundMedia{MimeType: "application/pdf", Filename: "Fatura Abril.pdf", DataBase64: png}},
		{Type: "sticker", Media: &providersim.InboundMedia{MimeType: "image/webp", DataBase64: png}},
		{Message: []byte(`{"type":"location","location":{"latitude":-23.55,"longitude":-46.63,"name":"Loja Centro"}}`)},
		{Message: []byte(`{"type":"reaction","reaction":{"message_id":"wamid.earlier","emoji":"👍"}}`)},
		{Message: []byte(`{"type":"interactive","context":{"from":"5511999990001","id":"wamid.earlier"},"interactive":{"type":"button_reply","button_reply":{"id":"yes","title":"Sim"}}}`)},
	} {
		in.PhoneNumberID, in.From, in.Name = "111", "5511977776666", "Maria"
		if _, err := ctl.Inbound(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	sent, err := ctl.Messages(ctx, "111")
	if err != nil || len(sent) != 2 {
		t.Fatalf("sent: %d %v", len(sent), err)
	}
	for _, st := range []string{"sent", "delivered", "read"} {
		if _, err := ctl.Receipt(ctx, providersim.ReceiptRequest{MessageID: sent[0].ID, Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ctl.Receipt(ctx, providersim.ReceiptRequest{MessageID: sent[1].ID, Status: "failed", Reason: providersim.ReasonNoAccount}); err != nil {
		t.Fatal(err)
	}
	// A message outside the document is refused (400), not posted.
	if _, err := ctl.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: "111", From: "5511977776666",
		Message: []byte(`{"type":"location","location":{"latitude":"x","colour":"red"}}`)}); err == nil ||
		!strings.Contains(err.Error(), ": 400 ") || !strings.Contains(err.Error(), "colour") {
		t.Errorf("a message outside the document: %v", err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 12 {
		t.Fatalf("%d webhooks, want 12", len(rc.bodies))
	}
	for i, b := range rc.bodies {
		if err := doc.ValidateRequest(providersim.OpWebhook, b); err != nil {
			t.Errorf("webhook %d: %v\n%s", i, err, b)
		}
		if rc.sigs[i] != providersim.Sign("sec", b) {
			t.Errorf("webhook %d signed %q", i, rc.sigs[i])
		}
	}
	if !strings.Contains(string(rc.bodies[8]), `"biz_opaque_callback_data":"42"`) || !strings.Contains(string(rc.bodies[8]), `"pricing"`) {
		t.Errorf("the receipt does not echo the callback data with its pricing: %s", rc.bodies[8])
	}
}

// TestDeliveriesCountEveryReceivedSend: the control API counts the sends
// of one message (by callback data, else recipient and body), refused ones
// included, and ids never repeat across a restart.
func TestDeliveriesCountEveryReceivedSend(t *testing.T) {
	t.Parallel()
	srv, ctl := start(t)
	ctx := context.Background()
	text := func(cb, body string) string {
		s := `{"messaging_product":"whatsapp","recipient_type":"individual","to":"5511977776666","type":"text","text":{"body":"` + body + `"}`
		if cb != "" {
			s += `,"biz_opaque_callback_data":"` + cb + `"`
		}
		return s + "}"
	}
	if err := ctl.Outage(ctx, providersim.FaultRequest{PhoneNumberID: "111", Count: 1}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{text("7", "a"), text("7", "a"), text("8", "b"), text("", "c"), text("", "c"), text("", "d")} {
		post(t, srv, "/111/messages", "tok", b)
	}
	list, err := ctl.Deliveries(ctx, "111")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int{}
	for _, d := range list {
		got[d.BizOpaqueCallbackData+"|"+d.Key[strings.LastIndex(d.Key, "/")+1:]] = [2]int{d.Received, d.Accepted}
		if len(d.MessageIDs) != d.Accepted {
			t.Errorf("%s: %d ids for %d accepted", d.Key, len(d.MessageIDs), d.Accepted)
		}
	}
	if got["7|7"] != [2]int{2, 1} || got["8|8"] != [2]int{1, 1} || len(list) != 4 {
		t.Fatalf("deliveries %+v", list)
	}
	// A restarted simulator (a new one) hands out other ids.
	srv2, _ := start(t)
	seen := map[string]bool{}
	for _, s := range []*httptest.Server{srv, srv2} {
		for range 20 {
			req, _ := http.NewRequest("POST", s.URL+"/111/messages", strings.NewReader(text("", "x")))
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			id := strings.Split(strings.SplitN(string(b), `"id":"`, 2)[1], `"`)[0]
			if seen[id] {
				t.Fatalf("id %s handed out twice", id)
			}
			seen[id] = true
		}
	}
}
