package httpapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestProviderWebhookAuthentication: the handshake echoes the challenge
// only for the account's verify token; deliveries must carry the right
// signature over the exact bytes.
func TestProviderWebhookAuthentication(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		token := official.VerifyToken(e.ch.ProviderAccount)
		verify := func(pnid, mode, tok string) *apitest.Response {
			q := url.Values{"hub.mode": {mode}, "hub.verify_token": {tok}, "hub.challenge": {"1158201444"}}
			return e.h.Do(apitest.Request{Method: "GET", Path: "/provider-webhooks/" + pnid + "?" + q.Encode()})
		}
		if r := verify(e.pnid, "subscribe", token); r.Status != 200 || string(r.Body) != "1158201444" {
			t.Fatalf("handshake: %d %s", r.Status, r.Body)
		}
		for name, r := range map[string]*apitest.Response{
			"wrong token":   verify(e.pnid, "subscribe", "guess"),
			"wrong mode":    verify(e.pnid, "unsubscribe", token),
			"unknown phone": verify("000", "subscribe", token),
		} {
			// An unknown id answers exactly like a wrong token.
			if r.Status != 403 || r.Map(t)["message"] != "The verify token does not match." {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}

		body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"Maria"},"wa_id":"5511977776666"}],"messages":[{"from":"5511977776666","id":"wamid.sig-test","timestamp":"1764770000","type":"text","text":{"body":"Olá"}}]}}]}]}`, e.pnid))
		post := func(pnid, sig string, b []byte) *apitest.Response {
			h := http.Header{"Content-Type": {"application/json"}}
			if sig != "" {
				h.Set("X-Hub-Signature-256", sig)
			}
			return e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + pnid, JSON: b, Header: h})
		}
		tampered := []byte(strings.Replace(string(body), "Olá", "Oi!", 1))
		cases := []struct {
			name   string
			pnid   string
			sig    string
			body   []byte
			status int
		}{
			{"unsigned", e.pnid, "", body, 401},
			{"signed with another secret", e.pnid, official.Sign("other-secret", body), body, 401},
			{"signature of other bytes", e.pnid, official.Sign(ofcAppSecret, body), tampered, 401},
			{"malformed signature", e.pnid, "sha256=zz", body, 401},
			{"unknown number, signed", "000", official.Sign(ofcAppSecret, body), body, 401},
			{"unknown number, unsigned", "000", "", body, 401},
			{"signed but not JSON", e.pnid, official.Sign(ofcAppSecret, []byte("{nope")), []byte("{nope"), 400},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := post(tc.pnid, tc.sig, tc.body)
				if r.Status != tc.status {
					t.Errorf("%d %s", r.Status, r.Body)
				}
				// A known and an unknown number are refused with the same body.
				if tc.status == 401 && r.Map(t)["message"] != "The webhook signature is missing or wrong." {
					t.Errorf("%s", r.Body)
				}
			})
		}
		if _, err := e.h.App.Messaging.FindByExternalID(context.Background(), e.ch.ID, "wamid.sig-test"); err == nil {
			t.Fatal("a rejected delivery stored its message")
		}
		// The same bytes, correctly signed, are accepted, and a repeated
		// delivery changes nothing.
		for range 2 {
			r := post(e.pnid, official.Sign(ofcAppSecret, body), body)
			if r.Status != 200 || r.Map(t)["messages"] != float64(1) {
				t.Fatalf("signed: %d %s", r.Status, r.Body)
			}
		}
		n, err := db.Bun.NewSelect().Table("messages").Where("external_id = ?", "wamid.sig-test").Count(context.Background())
		if err != nil || n != 1 {
			t.Fatalf("stored %d copies (%v)", n, err)
		}
	})
}

// TestInboundMessages: a contact's first message creates the conversation
// and publishes conversation.created and message.received (source 2);
// repeated deliveries are ignored; media is fetched from the provider and
// stored (after the webhook, by a job); a reply points at the message it
// answers.
func TestInboundMessages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		first := e.contactWrites(ofcContactKey, "Olá! Quero saber do pedido 4471.")
		created := e.sink.first("conversation created", func(ev delivery) bool { return ev.Name == events.OmnichatConversationCreated })
		received := e.sink.first("message received", messageEvent(events.OmnichatMessageReceived, first, 0))
		conv := received.Data["conversation"].(map[string]any)
		if received.Data["message_source_id"] != float64(2) || received.Data["text"] != "Olá! Quero saber do pedido 4471." ||
			conv["id"] != created.Data["id"] || conv["name"] != "Maria Souza" || conv["key"] != ofcContactKey || received.Data["company_channel_key"] != ofcSenderKey {
			t.Fatalf("received %+v created %+v", received.Data, created.Data)
		}
		// The same message delivered again.
		res, err := e.ctl.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: e.pnid, From: ofcContactKey, Text: "dup", ID: first})
		if err != nil || res.WebhookStatus != 200 {
			t.Fatalf("repeat: %+v %v", res, err)
		}
		m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, first)
		if err != nil || m.Text != "Olá! Quero saber do pedido 4471." {
			t.Fatalf("after a repeated delivery: %+v %v", m, err)
		}

		img := pngImage(t, 12, 12)
		res, err = e.ctl.Inbound(ctx, providersim.InboundRequest{PhoneNumberID: e.pnid, From: ofcContactKey, Type: "image", ReplyTo: first,
			Media: &providersim.InboundMedia{MimeType: "image/png", Caption: "a foto do pedido", DataBase64: base64.StdEncoding.EncodeToString(img)}})
		if err != nil || res.WebhookStatus != 200 {
			t.Fatalf("image: %+v %v", res, err)
		}
		// The file is fetched after the webhook was answered.
		e.sink.first("image received with its media", withMedia(events.OmnichatMessageReceived, res.MessageID))
		photo, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, res.MessageID)
		if err != nil || photo.TypeID != msgtype.Image || photo.Text != "a foto do pedido" || photo.MediaPath == "" ||
			photo.RepliedMessageID == nil || *photo.RepliedMessageID != m.ID {
			t.Fatalf("image message %+v %v", photo, err)
		}
		if stored, ok := storedFile(t, e.h.App, messageFileKey(photo.MediaPath)); !ok || string(stored) != string(img) {
			t.Fatalf("stored media: %d bytes, stored %v", len(stored), ok)
		}
		ev := e.sink.first("image received", messageEvent(events.OmnichatMessageReceived, res.MessageID, 0))
		if ev.Data["message_type_id"] != float64(msgtype.Image) || ev.Data["replied_message_id"] != float64(m.ID) {
			t.Fatalf("image event %+v", ev.Data)
		}
		if n := e.sink.count(func(ev delivery) bool { return ev.Name == events.OmnichatConversationCreated }); n != 1 {
			t.Fatalf("%d conversation.created events, want 1", n)
		}
		// The text once, the image when stored and again with its file. A
		// lane sends several deliveries at once, so the image's first event
		// may arrive after its second: count once all three can have come.
		receivedEvents := func() int {
			return e.sink.count(func(ev delivery) bool { return ev.Name == events.OmnichatMessageReceived })
		}
		eventually(t, "three message.received events", func() bool { return receivedEvents() >= 3 })
		if n := receivedEvents(); n != 3 {
			t.Fatalf("%d message.received events, want 3", n)
		}
	})
}

// TestReceiptsOrdering: receipts move a message Enviada → Entregue → Lida
// only forward; Falha carries the reason and only applies before delivery;
// each change is published as another message.sent.
func TestReceiptsOrdering(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		e.contactWrites(ofcContactKey, "Oi")
		sendOne := func(text string) string {
			var a struct{ Data struct{ ExternalID string } }
			r := e.send(map[string]any{"text": text})
			r.JSON(t, &a)
			if r.Status != 200 {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			return a.Data.ExternalID
		}
		receipt := func(t *testing.T, id, status, reason string) {
			t.Helper()
			res, err := e.ctl.Receipt(ctx, providersim.ReceiptRequest{MessageID: id, Status: status, Reason: reason})
			if err != nil || res.WebhookStatus != 200 {
				t.Fatalf("receipt %s: %+v %v", status, res, err)
			}
		}
		statusOf := func(t *testing.T, id string) messaging.Message {
			m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}

		a := sendOne("first")
		// Each receipt is judged against the status the earlier ones left,
		// so a failed step stops the rest.
		steps := []struct {
			name    string
			receipt string
			reason  string
			want    int
		}{
			{"sent", "sent", "", messaging.StatusSent},
			{"delivered", "delivered", "", messaging.StatusDelivered},
			{"stale sent never goes backwards", "sent", "", messaging.StatusDelivered},
			{"read", "read", "", messaging.StatusRead},
			{"stale delivered", "delivered", "", messaging.StatusRead},
			{"failure after reading is stale", "failed", "no_account", messaging.StatusRead},
			{"read again", "read", "", messaging.StatusRead},
		}
		for _, s := range steps {
			if !t.Run(s.name, func(t *testing.T) {
				receipt(t, a, s.receipt, s.reason)
				if m := statusOf(t, a); m.StatusID != s.want {
					t.Fatalf("status %d, want %d", m.StatusID, s.want)
				}
			}) {
				t.FailNow()
			}
		}
		e.sink.first("delivered", messageEvent(events.OmnichatMessageSent, a, messaging.StatusDelivered))
		e.sink.first("read", messageEvent(events.OmnichatMessageSent, a, messaging.StatusRead))
		// pending (no external id yet), sent, delivered, read: stale
		// receipts publish nothing.
		eventually(t, "the status events", func() bool {
			return e.sink.count(messageEvent(events.OmnichatMessageSent, a, 0)) == 3
		})
		if n := e.sink.count(messageEvent(events.OmnichatMessageSent, a, 0)); n != 3 {
			t.Fatalf("%d status events for the message after it got its id, want 3", n)
		}

		b := sendOne("second")
		receipt(t, b, "failed", "marketing_limit")
		m := statusOf(t, b)
		if m.StatusID != messaging.StatusFailed || m.FailureReason != "The marketing message limit for this recipient was reached (code 131049)" {
			t.Fatalf("failed receipt: %+v", m)
		}
		receipt(t, b, "delivered", "")
		if m := statusOf(t, b); m.StatusID != messaging.StatusFailed {
			t.Fatalf("Falha is final, got %d", m.StatusID)
		}
		e.sink.first("failed", messageEvent(events.OmnichatMessageSent, b, messaging.StatusFailed))
	})
}

// TestProviderWebhookRatePerAccount: an account's correctly signed
// deliveries beyond PROVIDER_WEBHOOK_RATE in a second answer 429 with
// Retry-After and store nothing; the provider's next delivery, a second
// later, is taken. Unsigned deliveries do not spend the account's share.
func TestProviderWebhookRatePerAccount(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true, configure: func(c *config.Config) { c.HTTP.ProviderWebhookRate = 2 }})
		ctx := context.Background()
		deliver := func(id, sig string) *apitest.Response {
			body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"Maria"},"wa_id":"5511977776666"}],"messages":[{"from":"5511977776666","id":%q,"timestamp":"1764770000","type":"text","text":{"body":"Olá"}}]}}]}]}`, e.pnid, id))
			if sig == "" {
				sig = official.Sign(ofcAppSecret, body)
			}
			return e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + e.pnid, JSON: body,
				Header: http.Header{"Content-Type": {"application/json"}, "X-Hub-Signature-256": {sig}}})
		}
		stored := func(id string) bool {
			_, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, id)
			return err == nil
		}
		steps := []struct {
			name, id, sig string
			advance       time.Duration
			status        int
		}{
			{"a forged delivery spends nothing", "wamid.rate-0", "sha256=00", 0, 401},
			{"the first of the second", "wamid.rate-1", "", 0, 200},
			{"the second of the second", "wamid.rate-2", "", 0, 200},
			{"one more in the same second", "wamid.rate-3", "", 0, 429},
			{"the provider's retry a second later", "wamid.rate-3", "", time.Second, 200},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				e.clk.Advance(st.advance)
				r := deliver(st.id, st.sig)
				if r.Status != st.status {
					t.Fatalf("status %d %s, want %d", r.Status, r.Body, st.status)
				}
				if st.status == 429 {
					if r.Header.Get("Retry-After") != "1" || r.Map(t)["message"] != official.MsgAccountRate {
						t.Fatalf("Retry-After %q, body %s", r.Header.Get("Retry-After"), r.Body)
					}
				}
				if got := stored(st.id); got != (st.status == 200) {
					t.Fatalf("%s stored: %v after status %d", st.id, got, st.status)
				}
			})
		}
	})
}
