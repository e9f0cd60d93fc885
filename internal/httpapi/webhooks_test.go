package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/chatmsg/gateway/asyncapi/subscriber"
	"github.com/chatmsg/gateway/internal/channels"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmsg/gateway/gen/events"
	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/clock"
	"github.com/chatmsg/gateway/internal/eventschema"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// webhookJSON is the subscription as the API returns it.
type webhookJSON struct {
	ID                int      `json:"id"`
	CompanyID         int      `json:"company_id"`
	CompanyChannelIDs *[]int   `json:"company_channel_ids"`
	Name              string   `json:"name"`
	URL               string   `json:"url"`
	Events            []string `json:"events"`
	Enabled           bool     `json:"enabled"`
	LastSuccessAt     *string  `json:"last_success_at"`
	LastFailureAt     *string  `json:"last_failure_at"`
	FailureCount      int      `json:"failure_count"`
	DisabledReason    *string  `json:"disabled_reason"`
	CreatedAt         string   `json:"created_at"`
	UpdatedAt         string   `json:"updated_at"`
}

type webhookEnvelope struct {
	Success bool        `json:"success"`
	Data    webhookJSON `json:"data"`
	Secret  string      `json:"secret"`
	Message string      `json:"message"`
}

type webhookPage struct {
	CurrentPage int           `json:"current_page"`
	PerPage     int           `json:"per_page"`
	Total       int           `json:"total"`
	LastPage    int           `json:"last_page"`
	Data        []webhookJSON `json:"data"`
}

func createWebhook(t testing.TB, h *apitest.Harness, token string, body map[string]any) webhookEnvelope {
	t.Helper()
	resp := h.Do(apitest.Request{Method: "POST", Path: "/api/channel-webhooks", Token: token, JSON: body})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", resp.Status, resp.Body)
	}
	var out webhookEnvelope
	resp.JSON(t, &out)
	return out
}

func subscribable() []string {
	var out []string
	for _, e := range events.Subscribable() {
		out = append(out, e.Name)
	}
	return out
}

func TestWebhookLifecycle(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 14, 3, 7, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
		ten := h.Tenant("Acme")
		seedChannels(t, h, ten.CompanyID, 15) // ids 1–15 on a fresh database

		created := createWebhook(t, h, ten.Token, map[string]any{
			"name": "CRM integration", "url": "https://hooks.example.com/chat-gateway",
			"events":              []string{"omnichat.message.sent", "bogus.event", "ping", "omnichat.message.received", "omnichat.message.sent"},
			"company_channel_ids": []int{15, 12, 15},
		})
		c := created.Data
		if !created.Success || created.Message == "" || !strings.HasPrefix(created.Secret, "whsec_") || len(created.Secret) != 70 {
			t.Fatalf("create answer: %+v", created)
		}
		if !slices.Equal(c.Events, []string{"omnichat.message.received", "omnichat.message.sent"}) {
			t.Errorf("events %v: unknown names and ping must be discarded, duplicates removed", c.Events)
		}
		if c.CompanyChannelIDs == nil || !slices.Equal(*c.CompanyChannelIDs, []int{12, 15}) {
			t.Errorf("company_channel_ids %v", c.CompanyChannelIDs)
		}
		if !c.Enabled || c.FailureCount != 0 || c.DisabledReason != nil || c.LastSuccessAt != nil || c.CompanyID != int(ten.CompanyID) {
			t.Errorf("defaults: %+v", c)
		}
		if c.CreatedAt != "2026-11-22 14:03:07" || c.UpdatedAt != c.CreatedAt {
			t.Errorf("timestamps %q %q", c.CreatedAt, c.UpdatedAt)
		}

		// Omitted or empty events = all subscribable ones (names given of
		// which none is known answer 422: TestWebhookValidation).
		all := createWebhook(t, h, ten.Token, map[string]any{"name": "All", "url": "http://127.0.0.1:9/all"}).Data
		empty := createWebhook(t, h, ten.Token, map[string]any{"name": "Empty", "url": "http://127.0.0.1:9/b", "events": []string{}, "company_channel_ids": nil, "enabled": false}).Data
		for _, w := range []webhookJSON{all, empty} {
			if !slices.Equal(w.Events, subscribable()) || w.CompanyChannelIDs != nil {
				t.Errorf("%s: events %v channels %v, want every subscribable event and null", w.Name, w.Events, w.CompanyChannelIDs)
			}
		}
		if empty.Enabled {
			t.Error("enabled=false ignored")
		}

		// Partial update: only the given fields change.
		clk.Advance(time.Minute)
		resp := h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token,
			JSON: map[string]any{"name": "Renamed"}})
		if resp.Status != http.StatusOK {
			t.Fatalf("update: %d %s", resp.Status, resp.Body)
		}
		var upd webhookEnvelope
		resp.JSON(t, &upd)
		u := upd.Data
		if u.Name != "Renamed" || u.URL != c.URL || !slices.Equal(u.Events, c.Events) || !slices.Equal(*u.CompanyChannelIDs, *c.CompanyChannelIDs) ||
			u.UpdatedAt != "2026-11-22 14:04:07" || u.CreatedAt != c.CreatedAt || upd.Secret != "" {
			t.Errorf("after partial update: %+v", upd)
		}
		// [] = all channels; events replaced.
		resp = h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token,
			JSON: map[string]any{"company_channel_ids": []int{}, "events": []string{"crm.business.won"}}})
		resp.JSON(t, &upd)
		if upd.Data.CompanyChannelIDs != nil || !slices.Equal(upd.Data.Events, []string{"crm.business.won"}) {
			t.Errorf("after channel/events update: %+v", upd.Data)
		}
		// null = all channels too (the document: "omitted or null = all
		// channels"), while an absent member leaves the filter alone.
		h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token,
			JSON: map[string]any{"company_channel_ids": []int{7}}}).JSON(t, &upd)
		if upd.Data.CompanyChannelIDs == nil || !slices.Equal(*upd.Data.CompanyChannelIDs, []int{7}) {
			t.Fatalf("set filter: %+v", upd.Data)
		}
		h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token,
			JSON: map[string]any{"name": "Still filtered"}}).JSON(t, &upd)
		if upd.Data.CompanyChannelIDs == nil {
			t.Errorf("an update without company_channel_ids cleared the filter")
		}
		h.Do(apitest.Request{Method: "PUT", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token,
			JSON: `{"company_channel_ids": null}`}).JSON(t, &upd)
		if upd.Data.CompanyChannelIDs != nil {
			t.Errorf("company_channel_ids: null did not mean all channels: %+v", upd.Data)
		}

		// The secret never appears in reads.
		resp = h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: ten.Token})
		if strings.Contains(string(resp.Body), created.Secret) || strings.Contains(string(resp.Body), "secret") {
			t.Errorf("list leaks the secret: %s", resp.Body)
		}

		// Rotation returns a new secret once.
		resp = h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/rotate-secret", c.ID), Token: ten.Token})
		var rot webhookEnvelope
		resp.JSON(t, &rot)
		if resp.Status != http.StatusOK || !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == created.Secret || rot.Data.ID != c.ID {
			t.Errorf("rotate: %d %s", resp.Status, resp.Body)
		}

		// Test queues one ping; on a disabled subscription it is a 509.
		resp = h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", c.ID), Token: ten.Token})
		if m := resp.Map(t); resp.Status != http.StatusOK || m["queued"] != float64(1) || m["success"] != true || m["message"] == "" {
			t.Errorf("test: %d %s", resp.Status, resp.Body)
		}
		resp = h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", empty.ID), Token: ten.Token})
		if m := resp.Map(t); resp.Status != 509 || m["message"] != "Webhook is disabled." || m["success"] != false {
			t.Errorf("test on disabled: %d %s", resp.Status, resp.Body)
		}

		// Deliveries of a fresh subscription: an empty page with the defaults.
		resp = h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries", all.ID), Token: ten.Token})
		if m := resp.Map(t); resp.Status != http.StatusOK || m["per_page"] != float64(50) || m["total"] != float64(0) {
			t.Errorf("deliveries: %d %s", resp.Status, resp.Body)
		}

		// Delete, then every operation on the id is a 509.
		resp = h.Do(apitest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/channel-webhooks/%d", c.ID), Token: ten.Token})
		if m := resp.Map(t); resp.Status != http.StatusOK || m["success"] != true {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		for _, r := range idOperations(c.ID) {
			r.Token = ten.Token
			resp := h.Do(r)
			if m := resp.Map(t); resp.Status != 509 || m["message"] != "Webhook not found." || m["success"] != false {
				t.Errorf("%s %s after delete: %d %s", r.Method, r.Path, resp.Status, resp.Body)
			}
		}

		// Available events: the catalog's subscribable events, without ping.
		resp = h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks-available-events", Token: ten.Token})
		var avail struct {
			Success bool `json:"success"`
			Data    []struct{ Event, Description string }
		}
		resp.JSON(t, &avail)
		if !avail.Success || len(avail.Data) != len(subscribable()) {
			t.Fatalf("available events: %s", resp.Body)
		}
		for i, e := range events.Subscribable() {
			if avail.Data[i].Event != e.Name || avail.Data[i].Description != e.Description {
				t.Errorf("available event %d: %+v, want %s", i, avail.Data[i], e.Name)
			}
		}
	})
}

// idOperations are the operations on one subscription id: the document's
// five and the redelivery extensions.
func idOperations(id int) []apitest.Request {
	p := fmt.Sprintf("/api/channel-webhooks/%d", id)
	return []apitest.Request{
		{Method: "PUT", Path: p, JSON: map[string]any{"name": "x"}},
		{Method: "DELETE", Path: p},
		{Method: "POST", Path: p + "/test"},
		{Method: "GET", Path: p + "/deliveries"},
		{Method: "POST", Path: p + "/rotate-secret"},
		{Method: "POST", Path: p + "/deliveries/0b8f3c2e-5d1a-4f7b-9c6e-2a4d8e1f3b57/redeliver"},
		{Method: "POST", Path: p + "/recover", JSON: map[string]any{"since": "2026-11-22T00:00:00Z"}},
	}
}

// seedChannels registers n official channels for a company; on a fresh
// database their ids are 1..n, which the filter tests name.
func seedChannels(t *testing.T, h *apitest.Harness, companyID int64, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := 1; i <= n; i++ {
		ch, err := h.App.Channels.RegisterOfficial(context.Background(), channels.OfficialInput{
			CompanyID: companyID, Name: fmt.Sprintf("Channel %d", i), Key: fmt.Sprintf("551199%07d", 1000+i+int(companyID)*100),
			BusinessAccountID: "waba", PhoneNumberID: fmt.Sprintf("pn-%d-%d", companyID, i), AccessToken: "t", AppSecret: "s",
			BaseURL: "http://127.0.0.1:1",
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ch.ID)
	}
	return ids
}

// A subscription's channel filter may only name the company's own channels:
// a foreign or unknown id would silently never match.
func TestWebhookChannelFilterNamesOwnChannels(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten, other := h.Tenant("Acme"), h.Tenant("Other")
		own := seedChannels(t, h, ten.CompanyID, 1)[0]
		foreign := seedChannels(t, h, other.CompanyID, 1)[0]
		id := createWebhook(t, h, ten.Token, map[string]any{"name": "ok", "url": "https://example.com/h", "company_channel_ids": []int64{own}}).Data.ID
		for _, tc := range []struct {
			name, method, path string
			ids                []int64
		}{
			{"create with another company's channel", "POST", "/api/channel-webhooks", []int64{own, foreign}},
			{"create with an unknown channel", "POST", "/api/channel-webhooks", []int64{999}},
			{"update with another company's channel", "PUT", fmt.Sprintf("/api/channel-webhooks/%d", id), []int64{foreign}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := map[string]any{"company_channel_ids": tc.ids}
				if tc.method == "POST" {
					body["name"], body["url"] = "n", "https://example.com/x"
				}
				resp := h.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: ten.Token, JSON: body})
				var ans validationAnswer
				resp.JSON(t, &ans)
				bad := tc.ids[len(tc.ids)-1]
				want := fmt.Sprintf("Company channel %d does not exist", bad)
				if resp.Status != http.StatusUnprocessableEntity || len(ans.Errors["company_channel_ids"]) != 1 || ans.Errors["company_channel_ids"][0] != want {
					t.Errorf("%d %s", resp.Status, resp.Body)
				}
			})
		}
		// Nothing changed: the subscription still filters on its own channel.
		var page webhookPage
		h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: ten.Token}).JSON(t, &page)
		if len(page.Data) != 1 || page.Data[0].CompanyChannelIDs == nil || !slices.Equal(*page.Data[0].CompanyChannelIDs, []int{int(own)}) {
			t.Errorf("after refused requests: %+v", page.Data)
		}
	})
}

func TestWebhookList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
		ten := h.Tenant("Acme")
		other := h.Tenant("Other")
		seedChannels(t, h, ten.CompanyID, 9) // ids 1–9 on a fresh database
		mk := func(tok, name, url string, channels any, enabled bool) int {
			clk.Advance(time.Second)
			return createWebhook(t, h, tok, map[string]any{"name": name, "url": url, "company_channel_ids": channels, "enabled": enabled}).Data.ID
		}
		a := mk(ten.Token, "Alpha CRM", "https://crm.example.com/a", nil, true)
		b := mk(ten.Token, "Beta", "https://hooks.example.com/crm_b", []int{7}, true)
		c := mk(ten.Token, "Gamma", "https://hooks.example.com/c", []int{8, 9}, false)
		d := mk(ten.Token, "Delta 100%", "https://d.example.com/x", []int{}, true)
		mk(other.Token, "Alpha CRM other", "https://crm.example.com/a", nil, true)

		cases := []struct {
			name  string
			query string
			want  []int
		}{
			{"all", "", []int{a, b, c, d}},
			{"filter on name or url, any case", "?filter=crm", []int{a, b}},
			{"filter with a literal underscore", "?filter=CRM_", []int{b}},
			{"filter with a literal percent", "?filter=100%25", []int{d}},
			{"disabled", "?enabled=false", []int{c}},
			{"enabled", "?enabled=true", []int{a, b, d}},
			{"channel 7 and those without a channel filter", "?company_channel_id=7", []int{a, b, d}},
			{"channel 9", "?company_channel_id=9", []int{a, c, d}},
			{"channel 70", "?company_channel_id=70", []int{a, d}},
			{"by name", "?orderBy=name", []int{a, b, d, c}},
			{"by name DESC", "?orderBy=name&orderMode=DESC", []int{c, d, b, a}},
			{"by name desc", "?orderBy=name&orderMode=desc", []int{c, d, b, a}},
			{"by id DESC", "?orderMode=DESC", []int{d, c, b, a}},
			{"second page", "?perPage=2&page=2", []int{c, d}},
			{"page past the end", "?perPage=2&page=3", nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks" + tc.query, Token: ten.Token})
				var page webhookPage
				resp.JSON(t, &page)
				var got []int
				for _, w := range page.Data {
					got = append(got, w.ID)
				}
				if resp.Status != http.StatusOK || !slices.Equal(got, tc.want) {
					t.Errorf("%d ids %v, want %v", resp.Status, got, tc.want)
				}
			})
		}
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks?perPage=2&page=2", Token: ten.Token})
		if m := resp.Map(t); m["total"] != float64(4) || m["per_page"] != float64(2) || m["current_page"] != float64(2) || m["last_page"] != float64(2) {
			t.Errorf("page envelope: %s", resp.Body)
		}
		resp = h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: ten.Token})
		if m := resp.Map(t); m["per_page"] != float64(100) {
			t.Errorf("default perPage: %s", resp.Body)
		}
	})
}

func TestWebhookValidation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		ten := h.Tenant("Acme")
		id := createWebhook(t, h, ten.Token, map[string]any{"name": "ok", "url": "https://example.com/h"}).Data.ID
		long := strings.Repeat("é", 151)
		cases := []struct {
			name   string
			method string
			body   any
			field  string
			msg    string
		}{
			{"name missing", "POST", map[string]any{"url": "https://example.com"}, "name", "Name is required"},
			{"name empty", "POST", map[string]any{"name": "", "url": "https://example.com"}, "name", ""},
			{"name blank", "POST", map[string]any{"name": "   ", "url": "https://example.com"}, "name", "Name is required"},
			{"name too long", "POST", map[string]any{"name": long, "url": "https://example.com"}, "name", ""},
			{"url missing", "POST", map[string]any{"name": "n"}, "url", "Url is required"},
			{"url not http", "POST", map[string]any{"name": "n", "url": "ftp://example.com/x"}, "url", "Url must be a valid http or https URL"},
			{"url not a url", "POST", map[string]any{"name": "n", "url": "hooks"}, "url", "Url must be a valid http or https URL"},
			{"url bad port", "POST", map[string]any{"name": "n", "url": "https://example.com:99999/x"}, "url", "Url must be a valid http or https URL"},
			{"url empty port", "POST", map[string]any{"name": "n", "url": "http://127.0.0.1:/e"}, "url", "Url must be a valid http or https URL"},
			{"update name empty", "PUT", map[string]any{"name": ""}, "name", ""},
			{"update url bad", "PUT", map[string]any{"url": "mailto:x@example.com"}, "url", "Url must be a valid http or https URL"},
			{"update url host missing", "PUT", map[string]any{"url": "https://:443/x"}, "url", "Url must be a valid http or https URL"},
			{"events all unknown", "POST", map[string]any{"name": "n", "url": "https://example.com", "events": []string{"nope", "omnichat.message.recieved"}}, "events", "Events must name at least one subscribable event"},
			{"events only ping", "POST", map[string]any{"name": "n", "url": "https://example.com", "events": []string{"ping"}}, "events", "Events must name at least one subscribable event"},
			{"update events all unknown", "PUT", map[string]any{"events": []string{"nope"}}, "events", "Events must name at least one subscribable event"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				path := "/api/channel-webhooks"
				if tc.method == "PUT" {
					path = fmt.Sprintf("/api/channel-webhooks/%d", id)
				}
				resp := h.Do(apitest.Request{Method: tc.method, Path: path, Token: ten.Token, JSON: tc.body})
				var body validationAnswer
				resp.JSON(t, &body)
				if resp.Status != http.StatusUnprocessableEntity || len(body.Errors[tc.field]) == 0 || body.Message == "" {
					t.Errorf("%d %s", resp.Status, resp.Body)
					return
				}
				if tc.msg != "" && (body.Message != tc.msg || body.Errors[tc.field][0] != tc.msg) {
					t.Errorf("message %q errors %v, want %q", body.Message, body.Errors, tc.msg)
				}
			})
		}
	})
}

func TestWebhookPermissions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		admin := h.Tenant("Acme")
		id := createWebhook(t, h, admin.Token, map[string]any{"name": "n", "url": "https://example.com/h"}).Data.ID
		p := fmt.Sprintf("/api/channel-webhooks/%d", id)
		ops := []struct {
			name string
			req  apitest.Request
			perm string
		}{
			{"list", apitest.Request{Method: "GET", Path: "/api/channel-webhooks"}, auth.PermWebhooksView},
			{"available events", apitest.Request{Method: "GET", Path: "/api/channel-webhooks-available-events"}, auth.PermWebhooksView},
			{"deliveries", apitest.Request{Method: "GET", Path: p + "/deliveries"}, auth.PermWebhooksView},
			{"create", apitest.Request{Method: "POST", Path: "/api/channel-webhooks", JSON: map[string]any{"name": "n", "url": "https://example.com"}}, auth.PermWebhooksCreate},
			{"update", apitest.Request{Method: "PUT", Path: p, JSON: map[string]any{"name": "m"}}, auth.PermWebhooksUpdate},
			{"test", apitest.Request{Method: "POST", Path: p + "/test"}, auth.PermWebhooksUpdate},
			{"rotate secret", apitest.Request{Method: "POST", Path: p + "/rotate-secret"}, auth.PermWebhooksUpdate},
			{"recover", apitest.Request{Method: "POST", Path: p + "/recover", JSON: map[string]any{"since": "2026-11-22T00:00:00Z"}}, auth.PermWebhooksUpdate},
			{"delete", apitest.Request{Method: "DELETE", Path: p}, auth.PermWebhooksDelete},
		}
		ctx := context.Background()
		for _, op := range ops {
			t.Run(op.name, func(t *testing.T) {
				// Every permission except the one the operation needs: 403.
				without := tokenWithout(t, h, admin.UserID, op.perm)
				r := op.req
				r.Token = without
				if resp := h.Do(r); resp.Status != http.StatusForbidden || resp.Map(t)["message"] != "This action is unauthorized." {
					t.Errorf("without %s: %d %s", op.perm, resp.Status, resp.Body)
				}
				// That permission alone is enough.
				only, _, err := h.App.Auth.CreateToken(ctx, admin.UserID, "only", []string{op.perm}, 0)
				if err != nil {
					t.Fatal(err)
				}
				r.Token = only
				if resp := h.Do(r); resp.Status >= 400 {
					t.Errorf("with only %s: %d %s", op.perm, resp.Status, resp.Body)
				}
			})
		}
	})
}

func TestWebhookCompanyIsolation(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		h := apitest.Start(t, db, apitest.Options{})
		a := h.Tenant("Acme")
		b := h.Tenant("Bravo")
		id := createWebhook(t, h, a.Token, map[string]any{"name": "mine", "url": "https://example.com/h"}).Data.ID
		for _, target := range []int{id, 987654} { // another company's id, then a missing one
			for _, r := range idOperations(target) {
				r.Token = b.Token
				resp := h.Do(r)
				if m := resp.Map(t); resp.Status != 509 || m["message"] != "Webhook not found." || m["success"] != false {
					t.Errorf("%s %s as another company: %d %s", r.Method, r.Path, resp.Status, resp.Body)
				}
			}
		}
		resp := h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: b.Token})
		if m := resp.Map(t); m["total"] != float64(0) {
			t.Errorf("another company's list: %s", resp.Body)
		}
		// Still intact for its owner.
		resp = h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks", Token: a.Token})
		if m := resp.Map(t); m["total"] != float64(1) {
			t.Errorf("owner's list: %s", resp.Body)
		}
	})
}

func TestWebhookRateLimit(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
		h := apitest.Start(t, db, apitest.Options{Now: clk.Now})
		ten := h.Tenant("Acme")
		other, _, err := h.App.Auth.CreateToken(context.Background(), ten.UserID, "second", auth.AllPermissions, 0)
		if err != nil {
			t.Fatal(err)
		}
		get := func(tok string) *apitest.Response {
			return h.Do(apitest.Request{Method: "GET", Path: "/api/channel-webhooks-available-events", Token: tok})
		}
		for i := range webhooks.ManagementLimit {
			if resp := get(ten.Token); resp.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i+1, resp.Status, resp.Body)
			}
		}
		resp := get(ten.Token)
		if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("request 121: %d %v %s", resp.Status, resp.Header, resp.Body)
		}
		if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); secs != 60 {
			t.Errorf("Retry-After %q, want 60 (the burst leaves the 60 s window then)", resp.Header.Get("Retry-After"))
		}
		// The limit is per token.
		if resp := get(other); resp.Status != http.StatusOK {
			t.Errorf("another token: %d", resp.Status)
		}
		clk.Advance(time.Minute)
		if resp := get(ten.Token); resp.Status != http.StatusOK {
			t.Errorf("after waiting: %d", resp.Status)
		}
	})
}

// TestWebhookDeliveryEndToEnd runs the real River workers: a ping queued
// through the API reaches a receiver on 127.0.0.1 signed as documented, and
// the attempt shows in the delivery log.
func TestWebhookDeliveryEndToEnd(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		sink := newEventSink(t, http.StatusAccepted)
		h := apitest.Start(t, db, apitest.Options{WorkJobs: true})
		ten := h.Tenant("Acme")
		created := sink.subscribe(h, ten.Token, map[string]any{"name": "rcv", "events": []string{"crm.business.won"}})
		resp := h.Do(apitest.Request{Method: "POST", Path: fmt.Sprintf("/api/channel-webhooks/%d/test", created.Data.ID), Token: ten.Token})
		if resp.Status != http.StatusOK {
			t.Fatalf("test: %d %s", resp.Status, resp.Body)
		}
		hd := sink.first("ping", anyDelivery)
		if err := subscriber.Verify(created.Secret, hd.Header, hd.Body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		if err := eventschema.ValidatePayload(events.Ping, hd.Body); err != nil {
			t.Errorf("payload: %v", err)
		}
		if err := eventschema.ValidateHeaders(events.Ping, hd.Header); err != nil {
			t.Errorf("headers: %v", err)
		}
		var env map[string]any
		_ = json.Unmarshal(hd.Body, &env)
		if env["event"] != "ping" || hd.Header.Get("X-Svc-Attempt") != "1" || env["delivery_id"] != hd.Header.Get("X-Svc-Delivery") {
			t.Errorf("delivery: %v %s", hd.Header, hd.Body)
		}

		// The log entry appears once the worker recorded it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp = h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/channel-webhooks/%d/deliveries", created.Data.ID), Token: ten.Token})
			var page struct {
				Total int `json:"total"`
				Data  []struct {
					DeliveryID  string  `json:"delivery_id"`
					Event       string  `json:"event"`
					Attempt     int     `json:"attempt"`
					StatusCode  int     `json:"status_code"`
					Succeeded   bool    `json:"succeeded"`
					Error       *string `json:"error"`
					DeliveredAt *string `json:"delivered_at"`
					NextRetryAt *string `json:"next_retry_at"`
				} `json:"data"`
			}
			resp.JSON(t, &page)
			// The page and its total are two queries: a row committing between
			// them can show in one and not yet in the other, so wait for both.
			if page.Total == 1 && len(page.Data) == 1 {
				e := page.Data[0]
				if e.DeliveryID != hd.Header.Get("X-Svc-Delivery") || e.Event != "ping" || e.Attempt != 1 || e.StatusCode != 202 ||
					!e.Succeeded || e.Error != nil || e.DeliveredAt == nil || e.NextRetryAt != nil {
					t.Errorf("log entry: %+v", e)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no log entry: %s", resp.Body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
