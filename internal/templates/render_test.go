package templates

import (
	"fmt"
	"testing"

	"github.com/chatmsg/gateway/internal/messaging"
)

func TestRenderAndParams(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		text   string
		req    messaging.TemplateRequest
		render string
		params string
	}{
		{"positional in order", "Olá {{1}}, pedido {{2}}", messaging.TemplateRequest{Positional: []string{"Ana", "#1"}}, "Olá Ana, pedido #1", "[{ Ana} { #1}]"},
		{"positional out of order and repeated", "{{2}} e {{1}} e {{2}}", messaging.TemplateRequest{Positional: []string{"a", "b"}}, "b e a e b", "[{ a} { b}]"},
		{"positional missing", "{{1}}-{{2}}-{{3}}", messaging.TemplateRequest{Positional: []string{"x"}}, "x--", "[{ x} { } { }]"},
		{"spaces inside braces", "{{ 1 }}!", messaging.TemplateRequest{Positional: []string{"ok"}}, "ok!", "[{ ok}]"},
		{"named", "Oi {{first_name}}, {{coupon}}", messaging.TemplateRequest{Named: map[string]string{"first_name": "Ana", "coupon": "X"}}, "Oi Ana, X", "[{first_name Ana} {coupon X}]"},
		{"named, underscore keys ignored", "{{_secret}}|{{name}}", messaging.TemplateRequest{Named: map[string]string{"_secret": "s", "name": "n"}}, "|n", "[{_secret } {name n}]"},
		{"named missing", "{{a}}{{b}}", messaging.TemplateRequest{Named: map[string]string{"a": "1"}}, "1", "[{a 1} {b }]"},
		{"no variables", "Sem variáveis", messaging.TemplateRequest{Positional: []string{"x"}}, "Sem variáveis", "[]"},
	}
	for _, tc := range cases {
		if got := Render(tc.text, tc.req); got != tc.render {
			t.Errorf("%s: Render = %q, want %q", tc.name, got, tc.render)
		}
		if got := fmt.Sprint(params(tc.text, tc.req)); got != tc.params {
			t.Errorf("%s: params = %s, want %s", tc.name, got, tc.params)
		}
	}
}

func TestDerivedName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://x.test/files/fatura%2048213.pdf?sig=1": "fatura 48213.pdf",
		"https://x.test/":             "",
		"https://x.test":              "",
		"https://x.test/a/b.png#frag": "b.png",
	} {
		if got := derivedName(in); got != want {
			t.Errorf("derivedName(%q) = %q, want %q", in, got, want)
		}
	}
}
