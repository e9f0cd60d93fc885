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
		t.Run(tc.name, func(t *testing.T) {
			if got := Render(tc.text, tc.req); got != tc.render {
				t.Errorf("Render = %q, want %q", got, tc.render)
			}
			if got := fmt.Sprint(params(tc.text, tc.req)); got != tc.params {
				t.Errorf("params = %s, want %s", got, tc.params)
			}
		})
	}
}

func TestDerivedName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"escaped name, query dropped", "https://x.test/files/fatura%2048213.pdf?sig=1", "fatura 48213.pdf"},
		{"root path", "https://x.test/", ""},
		{"no path", "https://x.test", ""},
		{"fragment dropped", "https://x.test/a/b.png#frag", "b.png"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := derivedName(tc.in); got != tc.want {
				t.Errorf("derivedName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
