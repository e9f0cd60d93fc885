package providersim

// DemoTemplates are templates for trying the gateway: positional and named
// variables, and IMAGE and DOCUMENT headers.
func DemoTemplates() []Template {
	return []Template{
		{Name: "order_update", Language: "pt_BR", Category: "UTILITY", Status: "APPROVED", ParameterFormat: "POSITIONAL",
			Components: []TemplateDefComponent{
				{Type: "BODY", Text: "Olá {{1}}, o pedido {{2}} saiu para entrega."},
				{Type: "FOOTER", Text: "Loja Exemplo"},
			}},
		{Name: "welcome_named", Language: "pt_BR", Category: "MARKETING", Status: "APPROVED", ParameterFormat: "NAMED",
			Components: []TemplateDefComponent{
				{Type: "HEADER", Format: "TEXT", Text: "Bem-vindo, {{first_name}}"},
				{Type: "BODY", Text: "Oi {{first_name}}, seu cupom é {{coupon}}."},
			}},
		{Name: "promo_image", Language: "pt_BR", Category: "MARKETING", Status: "APPROVED", ParameterFormat: "POSITIONAL",
			Components: []TemplateDefComponent{
				{Type: "HEADER", Format: "IMAGE", Example: &TemplateExample{HeaderHandle: []string{"https://example.com/promo.png"}}},
				{Type: "BODY", Text: "Promoção para {{1}}!"},
			}},
		{Name: "invoice_ready", Language: "pt_BR", Category: "UTILITY", Status: "APPROVED", ParameterFormat: "POSITIONAL",
			Components: []TemplateDefComponent{
				{Type: "HEADER", Format: "DOCUMENT"},
				{Type: "BODY", Text: "Olá {{1}}, a fatura do pedido {{2}} está pronta."},
				{Type: "BUTTONS", Buttons: []TemplateButton{{Type: "URL", Text: "Ver pedido", URL: "https://shop.example.com/orders/{{1}}"}}},
			}},
	}
}
