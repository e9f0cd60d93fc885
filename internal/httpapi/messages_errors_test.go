package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/messaging"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestOfficialSendErrors walks the error rows of the send endpoint for the
// official channel: each answers the documented status and message, and
// nothing reaches the provider unless the row is the provider's refusal.
func TestOfficialSendErrors(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{})
		ctx := context.Background()
		ofcSeedTemplates(t, e)
		e.contactWrites(ofcContactKey, "Oi")

		// Another company with its own official channel and templates.
		other := e.h.Tenant("Other Co")
		otherPNID := "2098" + ofcDigits(8)
		otherCh, err := e.h.App.Channels.RegisterOfficial(ctx, channels.OfficialInput{CompanyID: other.CompanyID, Name: "Other",
			Key: "5521999990002", BusinessAccountID: "waba-" + otherPNID, PhoneNumberID: otherPNID, AccessToken: ofcAccessToken,
			AppSecret: ofcAppSecret, BaseURL: e.ch.ProviderAccount.BaseURL})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.ctl.AddAccount(ctx, providersim.Account{PhoneNumberID: otherPNID, BusinessAccountID: "waba-" + otherPNID, AccessToken: ofcAccessToken, AppSecret: ofcAppSecret}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + otherPNID, Templates: ofcTemplates()[:1]}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.h.App.Templates.Sync(ctx, otherCh); err != nil {
			t.Fatal(err)
		}
		var foreignTemplate int64
		if err := db.Bun.NewSelect().Table("provider_templates").Column("id").Where("company_id = ?", other.CompanyID).Limit(1).Scan(ctx, &foreignTemplate); err != nil {
			t.Fatal(err)
		}
		// An unofficial connection of the company: not an official channel.
		if _, err := e.h.App.Channels.CreateUnofficial(ctx, e.ten.CompanyID, "Sales", "5511988887777"); err != nil {
			t.Fatal(err)
		}

		cases := []struct {
			name    string
			body    map[string]any
			status  int
			message string
		}{
			{"missing platform", map[string]any{"platform": nil}, 509, "Platform is required"},
			{"missing content", map[string]any{}, 509, "Text, file or provider_template_id is required"},
			{"sender of another company", map[string]any{"sender_key": "5521999990002", "text": "x"}, 509, "sender_key is not an official channel of the company"},
			{"sender is an unofficial connection", map[string]any{"sender_key": "5511988887777", "text": "x"}, 509, "sender_key is not an official channel of the company"},
			{"unknown sender", map[string]any{"sender_key": "5500000000000", "text": "x"}, 509, "sender_key is not an official channel of the company"},
			{"unknown template", map[string]any{"provider_template_id": 999999}, 509, "Template not found for this sender: provider_template_id must be a template of the sender's official channel"},
			{"template of another company", map[string]any{"provider_template_id": foreignTemplate}, 509, "Template not found for this sender: provider_template_id must be a template of the sender's official channel"},
			{"template not approved", map[string]any{"provider_template_id": e.templateAny("pending_review")}, 509, "Template pending_review is not approved by the provider (status PENDING)"},
			{"header media without template", map[string]any{"text": "x", "header_media_url": "https://example.com/a.png"}, 509, "header_media_url and header_media_filename are only accepted with provider_template_id"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				body := map[string]any{}
				for k, v := range tc.body {
					if v != nil {
						body[k] = v
					}
				}
				before := len(e.sent())
				var resp *apitest.Response
				if _, drop := tc.body["platform"]; drop {
					resp = e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: e.ten.Token,
						JSON: map[string]any{"sender_key": ofcSenderKey, "contact_key": ofcContactKey, "text": "x"}})
				} else {
					resp = e.send(body)
				}
				if resp.Status != tc.status || resp.Map(t)["message"] != tc.message {
					t.Fatalf("got %d %s, want %d %q", resp.Status, resp.Body, tc.status, tc.message)
				}
				if len(e.sent()) != before {
					t.Fatal("the provider received a message")
				}
			})
		}

		refusals := []struct {
			reason string
			code   float64
			text   string
		}{
			{providersim.ReasonNoAccount, 131026, "The recipient has no chat-app account"},
			{providersim.ReasonBlocked, 131031, "The business account is blocked"},
			{providersim.ReasonMarketingLimit, 131049, "The marketing message limit for this recipient was reached"},
		}
		for _, r := range refusals {
			t.Run("provider refusal "+r.reason, func(t *testing.T) {
				if err := e.ctl.Refuse(ctx, providersim.FaultRequest{PhoneNumberID: e.pnid, Reason: r.reason}); err != nil {
					t.Fatal(err)
				}
				resp := e.send(map[string]any{"text": "refused " + r.reason})
				body := resp.Map(t)
				details, _ := body["details"].(map[string]any)
				if resp.Status != 509 || body["message"] != "The provider refused the message" || details["reason"] != r.text || details["code"] != r.code {
					t.Fatalf("got %d %s", resp.Status, resp.Body)
				}
				ev := e.sink.first("failed", func(ev delivery) bool {
					return ev.Name == events.OmnichatMessageSent && ev.Data["text"] == "refused "+r.reason && ev.Data["status_id"] == float64(messaging.StatusFailed)
				})
				m, err := e.h.App.Messaging.Get(ctx, e.ten.CompanyID, int64(ev.Data["id"].(float64)))
				if err != nil || m.FailureReason != r.text || m.ExternalID != "" {
					t.Fatalf("stored %+v %v", m, err)
				}
			})
		}
	})
}

// templateAny finds a template id by name whatever its status (the list
// shows approved ones only).
func (e *officialEnv) templateAny(name string) int64 {
	e.t.Helper()
	var id int64
	if err := e.h.App.DB.Bun.NewSelect().Table("provider_templates").Column("id").Where("provider_account_id = ?", e.ch.ProviderAccount.ID).
		Where("name = ?", name).Scan(context.Background(), &id); err != nil {
		e.t.Fatalf("template %s: %v", name, err)
	}
	return id
}

// TestSendRateLimit: 600 sends per minute per company, shared by all its
// tokens; the 601st answers 429 with Retry-After, the exact seconds until
// the burst leaves the 60-second window; another company is not affected;
// no send fits before then (no refill), all of them after.
func TestSendRateLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		raw, _, err := e.h.App.Auth.CreateToken(context.Background(), e.ten.UserID, "second", []string{auth.PermMessagesSend}, 0)
		if err != nil {
			t.Fatal(err)
		}
		other := e.h.Tenant("Other")
		send := func(token string) *apitest.Response {
			// An unknown sender fails fast after the limiter counted it.
			return e.h.Do(apitest.Request{Method: "POST", Path: "/api/api-send-message", Token: token,
				JSON: map[string]any{"platform": "ofc_chatapp", "sender_key": "5500000000000", "contact_key": ofcContactKey, "text": "x"}})
		}
		for i := range 600 {
			token := e.ten.Token
			if i%2 == 1 {
				token = raw
			}
			if resp := send(token); resp.Status != 509 {
				t.Fatalf("send %d: %d %s", i+1, resp.Status, resp.Body)
			}
		}
		refused := func(token string, wantRetry int) {
			t.Helper()
			resp := send(token)
			if retry, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.Status != http.StatusTooManyRequests || retry != wantRetry {
				t.Fatalf("over the limit: %d Retry-After %q (want %d) %s", resp.Status, resp.Header.Get("Retry-After"), wantRetry, resp.Body)
			}
		}
		refused(e.ten.Token, 60)
		refused(raw, 60)
		if resp := send(other.Token); resp.Status != 509 {
			t.Fatalf("another company is limited too: %d", resp.Status)
		}
		e.clk.Advance(time.Second)
		refused(e.ten.Token, 59)
		e.clk.Advance(59 * time.Second)
		for i := range 600 {
			if resp := send(raw); resp.Status != 509 {
				t.Fatalf("a minute after the burst, send %d: %d", i+1, resp.Status)
			}
		}
		refused(raw, 60)
	})
}

// TestSendQuota: the monthly quota is unlimited by default; once set, the
// send over it answers 402 in plain text; a send refused by the window is
// not counted; a new month starts afresh.
func TestSendQuota(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ctx := context.Background()
		ofcSeedTemplates(t, e)
		tpl := map[string]any{"provider_template_id": e.template("order_update")}
		for i := range 3 {
			if resp := e.send(tpl); resp.Status != http.StatusOK {
				t.Fatalf("unlimited send %d: %d %s", i, resp.Status, resp.Body)
			}
		}
		two := int64(5)
		q, err := e.h.App.Messaging.SetQuota(ctx, e.ten.CompanyID, &two)
		if err != nil || q.Used != 3 || q.MonthlyLimit == nil || *q.MonthlyLimit != 5 {
			t.Fatalf("set quota: %+v %v", q, err)
		}
		if resp := e.send(map[string]any{"text": "window closed"}); resp.Status != http.StatusConflict {
			t.Fatalf("window closed: %d", resp.Status)
		}
		for i := range 2 {
			if resp := e.send(tpl); resp.Status != http.StatusOK {
				t.Fatalf("send %d within the quota: %d %s", i+4, resp.Status, resp.Body)
			}
		}
		resp := e.send(tpl)
		if resp.Status != http.StatusPaymentRequired || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
			string(resp.Body) != messaging.QuotaExhaustedMessage {
			t.Fatalf("over the quota: %d %q %s", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
		}
		// The window is checked before the quota (both in the send's
		// transaction): closed and exhausted answers 409, not 402.
		if resp := e.send(map[string]any{"text": "window closed, quota used"}); resp.Status != http.StatusConflict {
			t.Fatalf("window closed over the quota: %d %s", resp.Status, resp.Body)
		}
		if n := len(e.sent()); n != 5 {
			t.Fatalf("provider received %d, want 5", n)
		}
		// The next calendar month has a fresh count.
		now := e.clk.Now()
		e.clk.Advance(time.Date(now.Year(), now.Month()+1, 1, 0, 0, 1, 0, time.UTC).Sub(now))
		if resp := e.send(tpl); resp.Status != http.StatusOK {
			t.Fatalf("new month: %d %s", resp.Status, resp.Body)
		}
		if _, err := e.h.App.Messaging.SetQuota(ctx, e.ten.CompanyID, nil); err != nil {
			t.Fatal(err)
		}
		q, _ = e.h.App.Messaging.QuotaOf(ctx, e.ten.CompanyID)
		if q.MonthlyLimit != nil || q.Used != 1 {
			t.Fatalf("unlimited again: %+v", q)
		}
	})
}
