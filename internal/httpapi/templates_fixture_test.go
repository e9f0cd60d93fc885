package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/chatmsg/gateway/internal/apitest"
	"github.com/chatmsg/gateway/internal/providersim"
)

// ofcTemplates cover both variable formats and every header format.
func ofcTemplates() []providersim.Template {
	return []providersim.Template{
		{Name: "order_update", Language: "pt_BR", Category: "UTILITY", ParameterFormat: "POSITIONAL", Components: []providersim.TemplateDefComponent{
			{Type: "BODY", Text: "Olá {{1}}, o pedido {{2}} saiu para entrega."},
			{Type: "FOOTER", Text: "Loja"},
		}},
		{Name: "welcome_named", Language: "pt_BR", Category: "MARKETING", ParameterFormat: "NAMED", Components: []providersim.TemplateDefComponent{
			{Type: "HEADER", Format: "TEXT", Text: "Bem-vindo, {{first_name}}"},
			{Type: "BODY", Text: "Oi {{first_name}}, seu cupom é {{coupon}} ({{_internal}})."},
		}},
		{Name: "promo_image", Language: "pt_BR", Category: "MARKETING", Components: []providersim.TemplateDefComponent{
			{Type: "HEADER", Format: "IMAGE", Example: &providersim.TemplateExample{HeaderHandle: []string{"https://cdn.example.com/promo.png"}}},
			{Type: "BODY", Text: "Promoção para {{1}}!"},
		}},
		{Name: "clip", Language: "pt_BR", Category: "MARKETING", Components: []providersim.TemplateDefComponent{
			{Type: "HEADER", Format: "VIDEO"},
			{Type: "BODY", Text: "Veja o vídeo."},
		}},
		{Name: "invoice_ready", Language: "pt_BR", Category: "UTILITY", Components: []providersim.TemplateDefComponent{
			{Type: "HEADER", Format: "DOCUMENT"},
			{Type: "BODY", Text: "Olá {{1}}, a fatura {{2}} está pronta."},
			{Type: "BUTTONS", Buttons: []providersim.TemplateButton{{Type: "URL", Text: "Ver", URL: "https://shop.example.com/o/{{1}}"}, {Type: "QUICK_REPLY", Text: "Ok"}}},
		}},
		{Name: "pending_review", Language: "pt_BR", Category: "MARKETING", Status: "PENDING", Components: []providersim.TemplateDefComponent{
			{Type: "BODY", Text: "Ainda não aprovado."},
		}},
	}
}

// ofcSeedTemplates seeds the simulator and syncs the account.
func ofcSeedTemplates(t *testing.T, e *officialEnv) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ctl.SeedTemplates(ctx, providersim.TemplatesRequest{BusinessAccountID: "waba-" + e.pnid, Templates: ofcTemplates()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.h.App.Templates.Sync(ctx, e.ch); err != nil {
		t.Fatal(err)
	}
}

// template returns the id of an approved template by name, as the
// template list gives it.
func (e *officialEnv) template(name string) int64 {
	e.t.Helper()
	resp := e.h.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/provider-templates/for-channel?company_channel_id=%d", e.ch.ID), Token: e.ten.Token})
	if resp.Status != http.StatusOK {
		e.t.Fatalf("template list: %d %s", resp.Status, resp.Body)
	}
	var list struct {
		Templates []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"templates"`
	}
	resp.JSON(e.t, &list)
	for _, t := range list.Templates {
		if t.Name == name {
			return t.ID
		}
	}
	e.t.Fatalf("template %s is not listed: %s", name, resp.Body)
	return 0
}
