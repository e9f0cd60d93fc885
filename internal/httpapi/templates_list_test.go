package httpapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/providersim"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// TestTemplatesForChannel covers the template list's answers: 400, 403,
// 404 for a missing or foreign channel, official=false for an unofficial
// channel, and the approved templates of an official channel (synced on
// first use).
func TestTemplatesForChannel(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ctx := context.Background()
		if _, err := e.ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + e.pnid, Templates: ofcTemplates()}); err != nil {
			t.Fatal(err)
		}
		unofficial, err := e.h.App.Channels.CreateUnofficial(ctx, e.ten.CompanyID, "Sales", "5511988887777")
		if err != nil {
			t.Fatal(err)
		}
		other := e.h.Tenant("Other")
		noPerm := e.h.Tenant("No perm", auth.PermWebhooksView)
		path := func(id any) string {
			return fmt.Sprintf("/api/provider-templates/for-channel?company_channel_id=%v", id)
		}

		cases := []struct {
			name    string
			token   string
			path    string
			status  int
			message string
		}{
			{"missing id", e.ten.Token, "/api/provider-templates/for-channel", 400, "Company channel id is required"},
			{"no permission", noPerm.Token, path(e.ch.ID), 403, "This action is unauthorized."},
			{"unknown channel", e.ten.Token, path(999999), 404, "Company channel not found"},
			{"channel of another company", other.Token, path(e.ch.ID), 404, "Company channel not found"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := e.h.Do(apitest.Request{Method: "GET", Path: tc.path, Token: tc.token})
				if resp.Status != tc.status || resp.Map(t)["message"] != tc.message {
					t.Errorf("%d %s", resp.Status, resp.Body)
				}
			})
		}

		var list struct {
			Official  bool `json:"official"`
			Templates []struct {
				ID         int64  `json:"id"`
				Name       string `json:"name"`
				Status     string `json:"status"`
				HasButtons bool   `json:"has_buttons"`
				Value      struct {
					Components []map[string]any `json:"components"`
				} `json:"value"`
			} `json:"templates"`
		}
		resp := e.h.Do(apitest.Request{Method: "GET", Path: path(unofficial.ID), Token: e.ten.Token})
		resp.JSON(t, &list)
		if resp.Status != 200 || list.Official || list.Templates == nil || len(list.Templates) != 0 {
			t.Fatalf("unofficial channel: %d %s", resp.Status, resp.Body)
		}

		// The account was never synced: the first list syncs it.
		resp = e.h.Do(apitest.Request{Method: "GET", Path: path(e.ch.ID), Token: e.ten.Token})
		resp.JSON(t, &list)
		if resp.Status != 200 || !list.Official {
			t.Fatalf("official channel: %d %s", resp.Status, resp.Body)
		}
		var names []string
		for _, tpl := range list.Templates {
			names = append(names, tpl.Name)
			if tpl.Status != "APPROVED" {
				t.Errorf("%s listed with status %s", tpl.Name, tpl.Status)
			}
			if tpl.Name == "invoice_ready" && (!tpl.HasButtons || tpl.Value.Components[0]["format"] != "DOCUMENT") {
				t.Errorf("invoice_ready: %+v", tpl)
			}
		}
		if fmt.Sprint(names) != "[clip invoice_ready order_update promo_image welcome_named]" {
			t.Fatalf("listed %v", names)
		}
	})
}

// TestTemplateSync: templates are added, updated in place (ids kept) and
// marked disabled when the provider no longer lists them; every page of
// the provider's listing is read.
func TestTemplateSync(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newOfficialEnv(t, db, ofcEnvOptions{noWorkers: true})
		ctx := context.Background()
		var many []providersim.Template
		for i := range 130 {
			many = append(many, providersim.Template{Name: fmt.Sprintf("bulk_%03d", i), Language: "pt_BR", Category: "UTILITY",
				Components: []providersim.TemplateDefComponent{{Type: "BODY", Text: fmt.Sprintf("Mensagem %d para {{1}}", i)}}})
		}
		seed := func(list []providersim.Template, replace bool) {
			if _, err := e.ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + e.pnid, Templates: list, Replace: replace}); err != nil {
				t.Fatal(err)
			}
		}
		seed(many, false)
		res, err := e.h.App.Templates.Sync(ctx, e.ch)
		if err != nil || res.Added != 130 || res.Total != 130 || res.Updated != 0 {
			t.Fatalf("first sync: %+v %v", res, err)
		}
		firstID := e.template("bulk_000")

		changed := many[0]
		changed.Components = []providersim.TemplateDefComponent{{Type: "BODY", Text: "Texto novo {{1}}"}}
		seed([]providersim.Template{changed, many[1]}, true) // the other 128 are gone
		res, err = e.h.App.Templates.Sync(ctx, e.ch)
		if err != nil || res.Added != 0 || res.Updated != 2 || res.Disabled != 128 {
			t.Fatalf("second sync: %+v %v", res, err)
		}
		if id := e.template("bulk_000"); id != firstID {
			t.Fatalf("id changed on update: %d → %d", firstID, id)
		}
		tpl, err := e.h.App.Templates.Get(ctx, e.ten.CompanyID, firstID)
		if err != nil || tpl.Components[0].Text != "Texto novo {{1}}" {
			t.Fatalf("updated template: %+v %v", tpl, err)
		}
		// Disabled templates are not listed and cannot be sent.
		disabled := e.templateAny("bulk_050")
		resp := e.send(map[string]any{"provider_template_id": disabled})
		if resp.Status != 509 || resp.Map(t)["message"] != "Template bulk_050 is not approved by the provider (status DISABLED)" {
			t.Fatalf("send of a disabled template: %d %s", resp.Status, resp.Body)
		}
		// The periodic job syncs every account in use.
		seed([]providersim.Template{changed, many[1], many[2]}, true)
		n, err := e.h.App.Templates.SyncAll(ctx, 0)
		if err != nil || n != 1 {
			t.Fatalf("sync all: %d %v", n, err)
		}
		if tpl, err := e.h.App.Templates.Get(ctx, e.ten.CompanyID, e.templateAny("bulk_002")); err != nil || tpl.Status != "APPROVED" {
			t.Fatalf("bulk_002 after the periodic sync: %+v %v", tpl, err)
		}
	})
}
