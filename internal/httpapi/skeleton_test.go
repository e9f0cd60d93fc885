package httpapi_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/chatmsg/gateway/asyncapi"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/openapi"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
		ten := h.Tenant("Acme")
		ctx := context.Background()

		revokedRaw, revoked, err := h.App.Auth.CreateToken(ctx, ten.UserID, "old", auth.AllPermissions, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.App.Auth.RevokeToken(ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		expiringRaw, _, err := h.App.Auth.CreateToken(ctx, ten.UserID, "short", auth.AllPermissions, time.Hour)
		if err != nil {
			t.Fatal(err)
		}

		cases := []struct {
			name   string
			header string
			status int
		}{
			{"missing header", "", http.StatusUnauthorized},
			{"basic scheme", "Basic dXNlcjpwYXNz", http.StatusUnauthorized},
			{"empty bearer", "Bearer ", http.StatusUnauthorized},
			{"unknown token", "Bearer gw_unknown", http.StatusUnauthorized},
			{"revoked token", "Bearer " + revokedRaw, http.StatusUnauthorized},
			{"valid token", "Bearer " + ten.Token, http.StatusOK},
			{"lower-case scheme", "bearer " + ten.Token, http.StatusOK},
			{"token before expiry", "Bearer " + expiringRaw, http.StatusOK},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "GET", Path: "/api/company-channels", Header: http.Header{"Authorization": {tc.header}}})
				if resp.Status != tc.status {
					t.Errorf("status %d, want %d (%s)", resp.Status, tc.status, resp.Body)
				}
				if tc.status == http.StatusUnauthorized {
					if got := resp.Map(t)["message"]; got != "Unauthenticated." {
						t.Errorf("message %q", got)
					}
				}
			})
		}

		clk.Advance(time.Hour)
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/company-channels", Token: expiringRaw})
		if resp.Status != http.StatusUnauthorized {
			t.Errorf("expired token: status %d, want 401", resp.Status)
		}
	})
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		none := h.Tenant("No Perms", auth.PermEventsPublish)
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/provider-templates/for-channel?company_channel_id=1", Token: none.Token})
		if resp.Status != http.StatusForbidden {
			t.Fatalf("status %d, want 403: %s", resp.Status, resp.Body)
		}
	})
}

func TestCompanyScope(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		a, b := h.Tenant("Company A"), h.Tenant("Company B")
		_, err := h.App.Channels.RegisterOfficial(context.Background(), channels.OfficialInput{
			CompanyID: a.CompanyID, Name: "Sales", Key: "5511999990001", BusinessAccountID: "waba-1",
			PhoneNumberID: "pn-1", AccessToken: "tok", AppSecret: "secret", BaseURL: "http://127.0.0.1:1",
		})
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Total int `json:"total"`
			Data  []struct {
				Key           string `json:"key"`
				ChannelTypeID int    `json:"channel_type_id"`
				ChannelType   string `json:"channel_type"`
				Platform      string `json:"platform"`
			} `json:"data"`
		}
		h.Do(apitest.Request{Method: "GET", Path: "/api/company-channels", Token: a.Token}).JSON(t, &page)
		if page.Total != 1 || page.Data[0].Key != "5511999990001" || page.Data[0].ChannelTypeID != 3 || page.Data[0].ChannelType != "Official chat app" ||
			page.Data[0].Platform != "ofc_chatapp" {
			t.Fatalf("company A sees %+v", page)
		}
		h.Do(apitest.Request{Method: "GET", Path: "/api/company-channels", Token: b.Token}).JSON(t, &page)
		if page.Total != 0 || len(page.Data) != 0 {
			t.Fatalf("company B sees company A's channel: %+v", page)
		}
	})
}

func TestValidationMessages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		cases := []struct {
			name    string
			method  string
			path    string
			body    any
			status  int
			message string
			field   string // a field expected in a 422 errors object
		}{
			{"send: empty body", "POST", "/api/api-send-message", map[string]any{}, 509, "Platform is required", ""},
			{"send: no body", "POST", "/api/api-send-message", nil, 509, "Platform is required", ""},
			{"send: sender missing", "POST", "/api/api-send-message", map[string]any{"platform": "ofc_chatapp"}, 509, "Sender key is required", ""},
			{"send: contact missing", "POST", "/api/api-send-message", map[string]any{"platform": "ofc_chatapp", "sender_key": "5511999990001"}, 509, "Contact key is required", ""},
			{"send: no content", "POST", "/api/api-send-message", map[string]any{"platform": "ofc_chatapp", "sender_key": "5511999990001", "contact_key": "5511977776666"}, 509, "Text, file or provider_template_id is required", ""},
			{"send: template on chatapp", "POST", "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": "5511999990001", "contact_key": "5511977776666", "contact_is_group": false, "provider_template_id": 3}, 509, "provider_template_id is only accepted with platform ofc_chatapp", ""},
			{"send: chatapp without contact_is_group", "POST", "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": "5511999990001", "contact_key": "5511977776666", "text": "hi"}, 509, "contact_is_group is required with platform chatapp", ""},
			// The platform rules are the body's oneOf on platform: a missing required field of the body
			// still answers first, a wrong platform answers with the platform's message.
			{"send: chatapp without contact key nor contact_is_group", "POST", "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": "5511999990001", "text": "hi"}, 509, "Contact key is required", ""},
			{"send: unknown platform without sender", "POST", "/api/api-send-message", map[string]any{"platform": "fax", "contact_key": "2", "text": "hi"}, 509, "Sender key is required", ""},
			{"send: platform not a string", "POST", "/api/api-send-message", map[string]any{"platform": 7, "sender_key": "1", "contact_key": "2", "text": "hi"}, 509, "Platform must be chatapp or ofc_chatapp", ""},
			{"send: chatapp, contact_is_group of wrong type", "POST", "/api/api-send-message", map[string]any{"platform": "chatapp", "sender_key": "1", "contact_key": "2", "contact_is_group": "yes", "text": "hi"}, 509, "contact_is_group must be true or false", ""},
			{"send: template on ofc_chatapp passes the platform rules", "POST", "/api/api-send-message", map[string]any{"platform": "ofc_chatapp", "contact_key": "2", "provider_template_id": 3}, 509, "Sender key is required", ""},
			{"send: malformed JSON", "POST", "/api/api-send-message", `{"platform":`, 509, "", ""},
			{"send: wrong type", "POST", "/api/api-send-message", map[string]any{"platform": "ofc_chatapp", "sender_key": "5511999990001", "contact_key": "5511977776666", "text": "hi", "enqueue": "yes"}, 509, "", ""},
			{"send: unknown platform", "POST", "/api/api-send-message", map[string]any{"platform": "fax", "sender_key": "1", "contact_key": "2", "text": "hi"}, 509, "Platform must be chatapp or ofc_chatapp", ""},
			{"connection: neither id nor key", "POST", "/api/chatapp-delete", map[string]any{}, 509, "Id or key is required", ""},
			{"connection: id of wrong type", "POST", "/api/chatapp-logout", map[string]any{"id": "seven"}, 509, "", ""},
			{"edit: text missing", "POST", "/api/edit-message", map[string]any{"id": 1}, 509, "Text is required", ""},
			{"revoke: ids not an array", "POST", "/api/revoke-messages", map[string]any{"ids": 5}, 509, "", ""},
			{"revoke: bad scope", "POST", "/api/revoke-messages", map[string]any{"ids": []int{1}, "scope": "everyone"}, 509, "Scope must be me or all", ""},
			{"webhook: name missing", "POST", "/api/channel-webhooks", map[string]any{"url": "https://example.com/hook"}, 422, "Name is required", "name"},
			{"webhook: url malformed", "POST", "/api/channel-webhooks", map[string]any{"name": "n", "url": "not a url"}, 422, "", "url"},
			{"webhook: name too long", "POST", "/api/channel-webhooks", map[string]any{"name": string(bytes.Repeat([]byte("x"), 151)), "url": "https://example.com/hook"}, 422, "", "name"},
			{"templates: channel missing", "GET", "/api/provider-templates/for-channel", nil, 400, "Company channel id is required", ""},
			{"templates: channel not a number", "GET", "/api/provider-templates/for-channel?company_channel_id=abc", nil, 400, "", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: ten.Token, JSON: tc.body})
				if resp.Status != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
				}
				body := resp.Map(t)
				msg, _ := body["message"].(string)
				if msg == "" {
					t.Fatalf("no message in %s", resp.Body)
				}
				if tc.message != "" && msg != tc.message {
					t.Fatalf("message %q, want %q", msg, tc.message)
				}
				if tc.field != "" {
					errs, _ := body["errors"].(map[string]any)
					if _, ok := errs[tc.field]; !ok {
						t.Fatalf("errors has no %q: %s", tc.field, resp.Body)
					}
				}
			})
		}
	})
}

func TestServedDocumentsAndHealth(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{})
	for path, want := range map[string][]byte{"/openapi.yaml": openapi.Document, "/asyncapi.yaml": asyncapi.Document} {
		resp := h.Do(apitest.Request{Method: "GET", Path: path})
		if resp.Status != 200 || !bytes.Equal(resp.Body, want) {
			t.Errorf("%s: status %d, %d bytes; want the embedded document byte for byte", path, resp.Status, len(resp.Body))
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp := h.Do(apitest.Request{Method: "GET", Path: path}); resp.Status != 200 || resp.Map(t)["status"] != "ok" {
			t.Errorf("%s: %d %s", path, resp.Status, resp.Body)
		}
	}
	if body := scrape(t, h); !bytes.Contains([]byte(body), []byte("gateway_http_requests_total")) {
		t.Errorf("/metrics on the metrics listener lacks the request counter")
	}
	if resp := h.Do(apitest.Request{Method: "GET", Path: "/api/nope"}); resp.Status != 404 || resp.Map(t)["message"] == nil {
		t.Errorf("unknown path: %d %s", resp.Status, resp.Body)
	}
	if resp := h.Do(apitest.Request{Method: "PATCH", Path: "/api/chatapps"}); resp.Status != 405 || resp.Map(t)["message"] == nil {
		t.Errorf("wrong method: %d %s", resp.Status, resp.Body)
	}
}

func TestReadinessReportsDatabase(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	h := apitest.Start(t, db, apitest.Options{})
	_ = db.Bun.DB.Close()
	resp := h.Do(apitest.Request{Method: "GET", Path: "/readyz"})
	if resp.Status != http.StatusServiceUnavailable || resp.Map(t)["status"] != "unavailable" {
		t.Fatalf("readyz with a closed database: %d %s", resp.Status, resp.Body)
	}
}

func TestReadinessChecksRedisWhenConfigured(t *testing.T) {
	t.Parallel()
	// The app refuses to start when REDIS_URL is unreachable, so only the
	// reachable case can be served; it needs the machine's Redis.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err != nil {
		t.Skip("no Redis on 127.0.0.1:6379")
	} else {
		_ = c.Close()
	}
	h := apitest.Start(t, storetest.SQLite(t), apitest.Options{Configure: func(c *config.Config) { c.RedisURL = "redis://127.0.0.1:6379/0" }})
	resp := h.Do(apitest.Request{Method: "GET", Path: "/readyz"})
	checks, _ := resp.Map(t)["checks"].(map[string]any)
	if resp.Status != 200 || checks["redis"] != "ok" || checks["database"] != "ok" {
		t.Fatalf("readyz: %d %s", resp.Status, resp.Body)
	}
}
