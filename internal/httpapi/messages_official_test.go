package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

const ofcWindowClosed = "A janela de atendimento de 24 horas está fechada. Envie um template para iniciar a conversa."

// TestOfficialWindow walks the 24-hour window with the injectable clock:
// closed before the contact ever wrote, open after an inbound message,
// still open just before 24 h, closed after; templates pass either way.
func TestOfficialWindow(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ofcSeedTemplates(t, e)

		type step struct {
			name    string
			advance time.Duration
			inbound bool
			body    map[string]any
			status  int
		}
		steps := []step{
			{name: "text before the contact wrote", body: map[string]any{"text": "hi"}, status: http.StatusConflict},
			{name: "template before the contact wrote", body: map[string]any{"provider_template_id": e.template("order_update"), "variable_values": []string{"Ana", "#1"}}, status: http.StatusOK},
			{name: "contact writes", inbound: true},
			{name: "text right after", body: map[string]any{"text": "hello"}, status: http.StatusOK},
			{name: "text 23h59m later", advance: 23*time.Hour + 59*time.Minute, body: map[string]any{"text": "still here"}, status: http.StatusOK},
			{name: "text after 24h", advance: 2 * time.Minute, body: map[string]any{"text": "too late"}, status: http.StatusConflict},
			{name: "template after 24h", body: map[string]any{"provider_template_id": e.template("order_update")}, status: http.StatusOK},
			{name: "contact writes again", inbound: true},
			{name: "text in the new window", body: map[string]any{"text": "welcome back"}, status: http.StatusOK},
		}
		// Each step stands on the clock and window the earlier ones left, so
		// a failed step stops the rest.
		for _, s := range steps {
			if !t.Run(s.name, func(t *testing.T) {
				// e's helpers report to the step running.
				parent := e.t
				e.t = t
				defer func() { e.t = parent }()
				e.clk.Advance(s.advance)
				if s.inbound {
					e.contactWrites(ofcContactKey, "Olá")
					// The conversation listing shows the window the message
					// opened: 24 h from now.
					w := ofcListedWindow(t, e)
					if w.Open != true || w.RemainingMinutes != 1440 || !w.ExpiresAt.Equal(e.clk.Now().Add(24*time.Hour)) {
						t.Fatalf("listed window %+v", w)
					}
					return
				}
				before := len(e.sent())
				resp := e.send(s.body)
				if resp.Status != s.status {
					t.Fatalf("status %d, want %d: %s", resp.Status, s.status, resp.Body)
				}
				after := len(e.sent())
				switch s.status {
				case http.StatusConflict:
					body := resp.Map(t)
					if body["status"] != false || body["message"] != ofcWindowClosed {
						t.Fatalf("body %s", resp.Body)
					}
					if after != before {
						t.Fatal("the provider received a message although the window was closed")
					}
				case http.StatusOK:
					var sync struct {
						Status  bool
						Message string
						Data    struct{ ExternalID string }
					}
					resp.JSON(t, &sync)
					list := e.sent()
					if !sync.Status || after != before+1 || list[len(list)-1].ID != sync.Data.ExternalID {
						t.Fatalf("answer %s; provider has %d messages", resp.Body, after)
					}
				}
			}) {
				t.FailNow()
			}
		}
		// Nothing refused by the window was stored: the stored outbound
		// messages are exactly the accepted sends.
		n, err := db.Bun.NewSelect().Table("messages").Where("message_source_id = ?", messaging.SourceAPI).Count(context.Background())
		if err != nil || n != 5 {
			t.Fatalf("stored outbound messages: %d (%v), want 5", n, err)
		}
	})
}

type ofcWindow struct {
	Open             bool      `json:"open"`
	ExpiresAt        time.Time `json:"expires_at"`
	RemainingMinutes int       `json:"remaining_minutes"`
}

// ofcListedWindow reads the contact's window from GET /api/contact-channels
// with providerOpenedWindow.
func ofcListedWindow(t *testing.T, e *officialEnv) ofcWindow {
	t.Helper()
	q := url.Values{"with": {`["providerOpenedWindow"]`}, "channel_type_id": {"3"}}
	resp := e.h.Do(apitest.Request{Method: "GET", Path: "/api/contact-channels?" + q.Encode(), Token: e.ten.Token})
	var page struct {
		Data []struct {
			Key    string    `json:"key"`
			Window ofcWindow `json:"provider_opened_window"`
		} `json:"data"`
	}
	resp.JSON(t, &page)
	for _, c := range page.Data {
		if c.Key == ofcContactKey {
			return c.Window
		}
	}
	t.Fatalf("conversation not listed: %d %s", resp.Status, resp.Body)
	return ofcWindow{}
}

// TestOfficialSendSync checks the synchronous answer, what the provider
// received for text and file sends, the stored message and its events.
func TestOfficialSendSync(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		e.contactWrites(ofcContactKey, "Oi")
		e.sink.first("conversation created", func(ev delivery) bool { return ev.Name == events.OmnichatConversationCreated })

		resp := e.send(map[string]any{"text": "Seu pedido saiu.", "contact_key": "+" + ofcContactKey})
		if resp.Status != http.StatusOK {
			t.Fatalf("send: %d %s", resp.Status, resp.Body)
		}
		var sync struct {
			Status  bool
			Message string
			Data    struct {
				ExternalID string
				Raw        map[string]any `json:"raw"`
			}
		}
		resp.JSON(t, &sync)
		if !sync.Status || sync.Message != "Message sent" || sync.Data.ExternalID == "" || sync.Data.Raw["messaging_product"] != "whatsapp" {
			t.Fatalf("answer %s", resp.Body)
		}
		got := e.sent()[0]
		if got.To != ofcContactKey || got.Type != "text" || got.Request.Text.Body != "Seu pedido saiu." {
			t.Fatalf("provider got %+v", got)
		}
		m, err := e.h.App.Messaging.FindByExternalID(context.Background(), e.ch.ID, sync.Data.ExternalID)
		if err != nil {
			t.Fatal(err)
		}
		if m.StatusID != messaging.StatusSent || m.SourceID != messaging.SourceAPI || m.TypeID != msgtype.Text || m.ContactKey != ofcContactKey {
			t.Fatalf("stored %+v", m)
		}
		pending := e.sink.first("sent (pending)", messageEvent(events.OmnichatMessageSent, "", messaging.StatusPending))
		sent := e.sink.first("sent (Enviada)", messageEvent(events.OmnichatMessageSent, sync.Data.ExternalID, messaging.StatusSent))
		if pending.Data["id"] != sent.Data["id"] || pending.Data["external_id"] != nil || sent.Data["message_source_id"] != float64(4) ||
			sent.Data["company_channel_key"] != ofcSenderKey || sent.Data["contact_channel_key"] != ofcContactKey || sent.Data["user_id"] != nil {
			t.Fatalf("events: pending %+v sent %+v", pending.Data, sent.Data)
		}

		// A file (multipart, booleans as texts): uploaded to the provider
		// first, then sent by media id with its caption.
		img := pngImage(t, 20, 10)
		resp = e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token,
			Form: map[string]string{"platform": "ofc_chatapp", "sender_key": ofcSenderKey, "contact_key": ofcContactKey,
				"contact_is_group": "false", "enqueue": "false", "text": "a foto"},
			FileField: "file", FileName: "foto.pdf", FileType: "application/pdf", FileContent: img})
		if resp.Status != http.StatusOK {
			t.Fatalf("file send: %d %s", resp.Status, resp.Body)
		}
		list := e.sent()
		last := list[len(list)-1]
		if last.Type != "image" || last.Request.Image == nil || last.Request.Image.ID == "" || last.Request.Image.Caption != "a foto" {
			t.Fatalf("provider got %+v", last)
		}
		m, _ = e.h.App.Messaging.FindByExternalID(context.Background(), e.ch.ID, last.ID)
		if m.TypeID != msgtype.Image || m.MediaContentType != "image/png" || m.MediaPath == "" {
			t.Fatalf("stored file message %+v (type taken from the bytes, not the declared type)", m)
		}

		metrics := scrape(t, e.h)
		for _, want := range []string{
			`gateway_messages_accepted_total{channel_type="ofc_chatapp",mode="sync"} 2`,
			`gateway_messages_delivery_total{channel_type="ofc_chatapp",outcome="sent"} 2`,
			`gateway_messages_inbound_total{channel_type="ofc_chatapp"} 1`,
			`gateway_provider_request_duration_seconds_count{call="media_upload",result="2xx"} 1`,
			`gateway_provider_request_duration_seconds_count{call="messages",result="2xx"} 2`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
