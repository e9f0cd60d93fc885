package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/msgtype"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// postProviderWebhook signs body with the account's app secret and posts it
// to the provider webhook, as the provider does.
func (e *officialEnv) postProviderWebhook(body []byte) *apitest.Response {
	e.t.Helper()
	return e.h.Do(apitest.Request{Method: "POST", Path: "/provider-webhooks/" + e.pnid, JSON: body,
		Header: http.Header{"X-Hub-Signature-256": {official.Sign(ofcAppSecret, body)}}})
}

// TestProviderWebhookExamples: each of the 16 webhook examples of the
// provider's document, signed, answers 200 (a non-200 makes the provider
// retry) and is stored with its message type and a readable text.
func TestProviderWebhookExamples(t *testing.T) {
	t.Parallel()
	examples, err := providersim.MustLoadDocument().RequestExamples(providersim.OpWebhook)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typeID int
		text   string
	}{
		"Text Message": {msgtype.Text, "Does it come in another color?"},
		"Text Message with Context (Product Inquiry)": {msgtype.Text, "Is this still available? [about product di9ozbzfi4 of catalog 194836987003835]"},
		"Text Message from Click to WhatsApp Ad":      {msgtype.Text, `Hello! Can I get more info on this? [from ad "Chat with us" https://fb.me/3cr4Wqqkv]`},
		"Reaction Message":                            {msgtype.Reaction, "👍"},
		"Image Message":                               {msgtype.Image, "Taj Mahal"},
		"Location Message":                            {msgtype.Location, "Philz Coffee 101 Forest Ave, Palo Alto, CA 94301 (37.44221496582, -122.16165924072) https://philzcoffee.com/"},
		"Contact Sharing Message":                     {msgtype.Contacts, "Contacts: Lucía Gómez +1 (983) 555-2319 (Google)"},
		"Unsupported Message":                         {msgtype.Unsupported, `[unsupported message type "unsupported": Message type is currently not supported. (code 131051)]`},
		"Button Message":                              {msgtype.Reply, "Unsubscribe"},
		"Interactive List Reply Message":              {msgtype.Reply, "Priority Mail Express — Next Day to 2 Days"},
		"Interactive Button Reply Message":            {msgtype.Reply, "Cancel"},
		"Order Message":                               {msgtype.Order, "Order of 2 item(s) from catalog 194836987003835: di9ozbzfi4 x2 at 30 USD; nqryix03ez x1 at 25 USD"},
		"System Message":                              {msgtype.System, "User Sheena Nelson changed from 16505551234 to 12195555358"},
		"Group Create Message":                        {msgtype.System, "Group created: your-group-subject; participants added: 16505551234, 16505551235"},
		"Group Settings Update":                       {msgtype.System, "Group settings changed"},
		"Group Remove Participants":                   {msgtype.System, "Participants removed: 16505551234, 16505551235"},
	}
	if len(examples) != 16 || len(want) != 16 {
		t.Fatalf("%d examples", len(examples))
	}
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		jpeg := []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
		e.sim.AddMedia(e.pnid, "1003383421387256", "image/jpeg", jpeg)
		n := 0
		for name, raw := range examples {
			n++
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for example %q", name)
			}
			// The examples are about another number, and four of them
			// share one message id, which a platform id never does.
			var p struct {
				Object string `json:"object"`
				Entry  []struct {
					ID      string `json:"id"`
					Changes []struct {
						Field string         `json:"field"`
						Value map[string]any `json:"value"`
					} `json:"changes"`
				} `json:"entry"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			v := p.Entry[0].Changes[0].Value
			v["metadata"].(map[string]any)["phone_number_id"] = e.pnid
			externalID := ""
			if msgs, ok := v["messages"].([]any); ok {
				externalID = fmt.Sprintf("wamid.example-%d", n)
				msgs[0].(map[string]any)["id"] = externalID
			} else {
				g := v["groups"].([]any)[0].(map[string]any)
				externalID = "group." + p.Entry[0].Changes[0].Field + "." + g["type"].(string) + "." + g["request_id"].(string)
			}
			body, _ := json.Marshal(p)
			r := e.postProviderWebhook(body)
			if r.Status != 200 || r.Map(t)["messages"] != float64(1) {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
				continue
			}
			m, err := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, externalID)
			if err != nil {
				t.Errorf("%s: not stored: %v", name, err)
				continue
			}
			if m.TypeID != w.typeID || m.Text != w.text || m.SourceID != messaging.SourceContact {
				t.Errorf("%s: stored type %d text %q, want %d %q", name, m.TypeID, m.Text, w.typeID, w.text)
			}
			if name == "Image Message" {
				// The file follows from a job once the webhook is answered.
				eventually(t, "the image's media", func() bool {
					m, err = e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, externalID)
					return err == nil && m.MediaPath != ""
				})
				if m.MediaContentType != "image/jpeg" || m.MediaSize != int64(len(jpeg)) {
					t.Errorf("image stored with other media: %+v", m)
				}
			}
			if strings.HasPrefix(name, "Group") && !m.IsGroup {
				t.Errorf("%s: not in the group's conversation: %+v", name, m)
			}
		}
	})
}

// TestProviderReceiptsCarryWhatTheProviderSaid: a stale receipt counts as
// ignored, not applied; a failure stores every error with its code and the
// conversation and pricing the status carries.
func TestProviderReceiptsCarryWhatTheProviderSaid(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		e.contactWrites(ofcContactKey, "Oi")
		status := func(id, st, extra string) []byte {
			return []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":%q,"phone_number_id":%q},"statuses":[{"id":%q,"status":%q,"timestamp":"1764770000","recipient_id":%q%s}]}}]}]}`,
				ofcSenderKey, e.pnid, id, st, ofcContactKey, extra))
		}
		sendText := func(text string) string {
			var a struct{ Data struct{ ExternalID string } }
			r := e.send(map[string]any{"text": text})
			if r.Status != 200 {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			r.JSON(t, &a)
			return a.Data.ExternalID
		}
		id := sendText("primeira")
		// Each receipt is judged against the status the earlier ones left,
		// so a failed step stops the rest.
		for _, tc := range []struct {
			name              string
			status            string
			receipts, ignored float64
			want              int
		}{
			{"delivered", "delivered", 1, 0, messaging.StatusDelivered},
			{"read", "read", 1, 0, messaging.StatusRead},
			{"stale delivered changes nothing", "delivered", 0, 1, messaging.StatusRead},
			{"repeated read", "read", 0, 1, messaging.StatusRead},
		} {
			if !t.Run(tc.name, func(t *testing.T) {
				// e's helpers report to the step running.
				parent := e.t
				e.t = t
				defer func() { e.t = parent }()
				r := e.postProviderWebhook(status(id, tc.status, ""))
				if r.Status != 200 || r.Map(t)["receipts"] != tc.receipts || r.Map(t)["ignored"] != tc.ignored {
					t.Fatalf("receipt: %d %s", r.Status, r.Body)
				}
				if m, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, id); m.StatusID != tc.want {
					t.Fatalf("status %d", m.StatusID)
				}
			}) {
				t.FailNow()
			}
		}

		failed := sendText("segunda")
		r := e.postProviderWebhook(status(failed, "failed", `,"errors":[{"code":131026,"title":"Message undeliverable","message":"Message undeliverable","error_data":{"details":"The recipient has no chat-app account"}},{"code":131047,"title":"Re-engagement message"}],"conversation":{"id":"CONV1","origin":{"type":"service"}},"pricing":{"billable":false,"pricing_model":"PMP","category":"service"}`))
		if r.Status != 200 || r.Map(t)["receipts"] != float64(1) {
			t.Fatalf("failed receipt: %d %s", r.Status, r.Body)
		}
		m, _ := e.h.App.Messaging.FindByExternalID(ctx, e.ch.ID, failed)
		if want := "The recipient has no chat-app account (code 131026); Re-engagement message (code 131047) [conversation CONV1 service, pricing service]"; m.StatusID != messaging.StatusFailed || m.FailureReason != want {
			t.Fatalf("failed: status %d reason %q", m.StatusID, m.FailureReason)
		}
	})
}
